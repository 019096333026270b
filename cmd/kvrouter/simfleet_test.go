package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestSimDisaggFleetServesThroughServe runs kvrouter sim's disaggregated
// fleet (one prefill, one decode engine) for each transfer protocol,
// registers it with kvrouter serve through the workers file it prints, and
// sends a completion through serve's proxy with --disagg always: the
// prefill engine gets exactly its protocol's prefill leg and the decode
// engine exactly what that leg returned (each refuses anything else, and
// the fleet counts the refusals), and the client gets the decode leg's
// answer.
func TestSimDisaggFleetServesThroughServe(t *testing.T) {
	for _, proto := range []string{"vllm", "sglang", "trtllm"} {
		t.Run(proto, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			out, fleetOut := io.Pipe()
			var fleetLog lockedBuffer
			done := make(chan error, 1)
			go func() {
				done <- runSimFleet(ctx, pdFleet{prefill: 1, decode: 1, protocol: proto, host: "127.0.0.1", model: "sim",
					blockSize: 4, capacity: 256, completion: 3}, fleetOut, &fleetLog)
			}()
			var regs []api.Registration
			if err := json.NewDecoder(out).Decode(&regs); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			if len(regs) != 2 || regs[0].Role != api.RolePrefill || regs[1].Role != api.RoleDecode || regs[0].ServingEndpoint == "" {
				t.Fatalf("registrations %+v: want a prefill and a decode engine with serving endpoints", regs)
			}
			if (proto == "sglang") != (regs[0].BootstrapPort != 0) {
				t.Fatalf("%s prefill registration %+v: a bootstrap address exactly for SGLang", proto, regs[0])
			}
			file := filepath.Join(t.TempDir(), "fleet.json")
			raw, _ := json.Marshal(regs)
			if err := os.WriteFile(file, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			httpAddr, proxy := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
			serveInProcess(t, "--http", httpAddr, "--block-size", "4", "--workers-file", file, "--proxy-listen", proxy,
				"--disagg", "always", "--proxy-disagg-protocol", proto, "--proxy-on-prefill-failure", "fail")
			eventually.True(t, "serve answers with both workers registered", func() (bool, string) {
				resp, err := http.Get("http://" + httpAddr + "/workers")
				if err != nil {
					return false, err.Error()
				}
				defer resp.Body.Close()
				var ws []api.WorkerInfo
				_ = json.NewDecoder(resp.Body).Decode(&ws)
				return len(ws) == 2, "workers registered"
			})
			resp, err := http.Post("http://"+proxy+"/v1/completions", "application/json",
				strings.NewReader(`{"model":"sim","max_tokens":3,"prompt":[`+strings.Repeat("7,", 63)+`7]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"completion_tokens":3`) {
				t.Fatalf("through the proxy: %d %s", resp.StatusCode, body)
			}
			// The one decision, and no other: every series but always/split is 0.
			for _, l := range scrapeLines(t, "http://"+httpAddr+"/metrics", "kvrouter_disagg_decisions_total{") {
				want := " 0"
				if strings.HasPrefix(l, `kvrouter_disagg_decisions_total{reason="always",split="true"}`) {
					want = " 1"
				}
				if !strings.HasSuffix(l, want) {
					t.Errorf("after one split request: %s, want it to end in%s", l, want)
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := fleetLog.String(); !strings.Contains(got, "prefill legs 1, decode legs 1, local prefills on decode engines 0, refused 0") {
				t.Fatalf("the fleet's counts:\n%s", got)
			}
		})
	}
}

// scrapeLines are the lines of the text exposition at url that start
// with prefix (the test fails when there is none).
func scrapeLines(t *testing.T, url, prefix string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var found []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no line of %s starts with %s", url, prefix)
	}
	return found
}
