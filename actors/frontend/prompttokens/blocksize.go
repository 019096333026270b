package prompttokens

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
)

// vllmBlockSize finds block_size="N" on vLLM's cache_config_info gauge.
var vllmBlockSize = regexp.MustCompile(`^vllm:cache_config_info\{.*\bblock_size="(\d+)"`)

// BlockSize asks the engine the KV block size it runs with: vLLM reports it
// as a label of the vllm:cache_config_info gauge on GET /metrics, SGLang
// as page_size in GET /get_server_info. 0 with a nil error: the engine
// reports none.
func (e *Engine) BlockSize(ctx context.Context) (int, error) {
	n, err := e.get(ctx, "/metrics", func(r io.Reader) (int, error) {
		sc := bufio.NewScanner(io.LimitReader(r, maxAnswer))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if m := vllmBlockSize.FindStringSubmatch(sc.Text()); m != nil {
				return strconv.Atoi(m[1])
			}
		}
		return 0, sc.Err()
	})
	if n > 0 || err != nil {
		return n, err
	}
	return e.get(ctx, "/get_server_info", func(r io.Reader) (int, error) {
		var info struct {
			PageSize int `json:"page_size"`
		}
		if err := json.NewDecoder(io.LimitReader(r, maxAnswer)).Decode(&info); err != nil {
			return 0, err
		}
		return info.PageSize, nil
	})
}

func (e *Engine) get(ctx context.Context, path string, read func(io.Reader) (int, error)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", path, resp.Status)
	}
	n, err := read(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
