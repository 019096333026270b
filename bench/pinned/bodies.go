package pinned

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// routeBodies builds one /route body per prompt of the trace ref, with the
// token expansion the simulated engines use (tokensPerBlock, seed): the
// same prompts the engines serve, so routes walk real index paths.
// Bodies carry no request_id (the router draws one, as for most clients).
func routeBodies(ref string, tokensPerBlock int, seed uint64, model string) ([][]byte, error) {
	d, err := simengine.OpenTrace(ref, simengine.TraceConfig{TokensPerBlock: tokensPerBlock, Seed: seed})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var bodies [][]byte
	for {
		p, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		b := make([]byte, 0, 32+len(model)+8*len(p.Tokens))
		b = append(b, `{"model_name":`...)
		b = strconv.AppendQuote(b, model)
		b = append(b, `,"token_ids":[`...)
		for i, t := range p.Tokens {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(t), 10)
		}
		bodies = append(bodies, append(b, "]}"...))
	}
	if len(bodies) == 0 {
		return nil, fmt.Errorf("trace %s has no prompt", ref)
	}
	return bodies, nil
}
