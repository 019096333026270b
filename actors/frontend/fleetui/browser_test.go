//go:build browser

// The fleet page in a real browser: Debian's Chromium, headless, driven
// over the DevTools protocol (chromedp), loads /ui of a router fed by
// simulated engines. `make test-ui` runs it (the build tag keeps it out of
// the plain `go test ./...`, which has no browser to count on);
// KVROUTER_UI_SCREENSHOT=path also writes the page's screenshot there
// (`make ui-screenshot` refreshes the one in the docs).
package fleetui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

const blockSize = 4

// router is kvrouter serve's HTTP API (with its /metrics) over simulated
// engines: exact ones with a replay endpoint, and one heard late without
// replay, so its stream is degraded.
type router struct {
	url     string
	engines map[uint64]*simengine.Engine
	want    map[uint64]api.StreamState
}

func post(t *testing.T, url string, body any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %s %s", url, resp.Status, out.String())
	}
	return out.Bytes()
}

func tokens(seed, blocks int) []uint32 {
	p := make([]uint32, blocks*blockSize)
	for i := range p {
		p[i] = uint32(seed*1000 + i)
	}
	return p
}

func startRouter(t *testing.T) *router {
	host, err := service.StartHost(actor.NewActorSystem(), service.HostConfig{
		Service: service.Config{BlockSize: blockSize, Routing: routing.DefaultConfig(), Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	h, err := host.Handler(httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r := &router{url: srv.URL, engines: map[uint64]*simengine.Engine{}, want: map[uint64]api.StreamState{}}
	for id := uint64(1); id <= 4; id++ {
		opts := simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: blockSize, CapacityBlocks: 256}
		r.want[id] = api.StateExact
		if id == 3 { // published before the router came, no replay: history unknown
			opts.ReplayEndpoint, opts.SeqStart = "", 40
			r.want[id] = api.StateDegraded
		}
		eng, err := simengine.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		r.engines[id] = eng
		post(t, r.url+"/register", map[string]any{"instance_id": id, "endpoint": eng.Endpoint(),
			"replay_endpoint": eng.ReplayEndpoint(), "model_name": "llama", "block_size": blockSize})
	}
	// Each attempt serves a new prompt: a repeated one is a cache hit that
	// publishes nothing, so a first batch published before the router's
	// subscription took hold (ZeroMQ drops it) would never be followed by
	// another, and the stream without replay would never see a block.
	attempt := 0
	eventually.True(t, "every stream in its state, with blocks", func() (bool, string) {
		for id, eng := range r.engines {
			eng.Serve(tokens(int(id)+100*attempt, 3+int(id)), "")
		}
		attempt++
		resp, err := http.Get(r.url + "/workers")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		var ws []api.WorkerInfo
		_ = json.NewDecoder(resp.Body).Decode(&ws)
		ok := len(ws) == len(r.want)
		for _, w := range ws {
			ok = ok && len(w.Ranks) == 1 && w.Ranks[0].State == r.want[uint64(w.InstanceID)] && w.Ranks[0].Blocks > 0
		}
		return ok, fmt.Sprintf("%+v", ws)
	})
	for i := range 12 {
		post(t, r.url+"/route", map[string]any{"token_ids": tokens(1+i%4, 6), "model_name": "llama", "include_scores": i%2 == 0})
	}
	return r
}

// waitPolls waits until the page has finished n polls (its body's
// data-polls attribute).
func waitPolls(d *devtools, n int) {
	d.t.Helper()
	d.eval(fmt.Sprintf(`new Promise(done => {
		const ok = () => Number(document.body.dataset.polls || 0) >= %d;
		if (ok()) return done(true);
		new MutationObserver((_, o) => { if (ok()) { o.disconnect(); done(true); } }).observe(document.body, {attributes: true});
	})`, n), nil)
}

type shownRow struct {
	Worker, Rank, State, StateCell, StateClass, Blocks string
}

func TestFleetPageInChromium(t *testing.T) {
	r := startRouter(t)
	d := startBrowser(t)
	d.navigate(r.url + "/ui")
	// Two polls done: the rates are differences between two.
	waitPolls(d, 2)
	var rows []shownRow
	d.eval(`[...document.querySelectorAll("#workers tbody tr")].map(tr => ({
		Worker: tr.dataset.worker, Rank: tr.dataset.rank, State: tr.dataset.state,
		StateCell: tr.cells[4].textContent, StateClass: tr.cells[4].className, Blocks: tr.cells[5].textContent}))`, &rows)
	// Six more routes, then a poll that started after them (polls run one
	// at a time: the one after the next).
	for i := range 6 {
		post(t, r.url+"/route", map[string]any{"token_ids": tokens(1+i%4, 6), "model_name": "llama"})
	}
	var polls int
	d.eval(`Number(document.body.dataset.polls)`, &polls)
	waitPolls(d, polls+2)
	var routes string
	d.eval(`document.getElementById("c-routes").textContent`, &routes)
	if routes != "18" {
		t.Errorf("routes answered %q, want 18 (the decisions /decisions counted)", routes)
	}
	var rate, hit string
	var decisions int
	d.eval(`document.getElementById("c-rate").textContent`, &rate)
	d.eval(`document.getElementById("c-hit").textContent`, &hit)
	d.eval(`document.querySelectorAll("#decisions tbody tr").length`, &decisions)
	if len(rows) != len(r.want) {
		t.Errorf("the page shows %d workers, want %d: %+v", len(rows), len(r.want), rows)
	}
	for _, row := range rows {
		var id uint64
		fmt.Sscan(row.Worker, &id)
		want := string(r.want[id])
		if row.State != want || row.StateCell != want || row.StateClass != "state-"+want || row.Blocks == "0" || row.Blocks == "" {
			t.Errorf("worker %s shown as %+v, want state %s with blocks", row.Worker, row, want)
		}
	}
	// The rates span the last minute of polls: from before the six
	// routes to after them.
	var rateV float64
	if _, err := fmt.Sscan(rate, &rateV); err != nil || rateV <= 0 || !strings.HasSuffix(hit, " %") {
		t.Errorf("route rate %q, hit rate %q: want both over a window that saw the six routes", rate, hit)
	}
	if decisions != 18 {
		t.Errorf("the page lists %d decisions, want the 18 routed", decisions)
	}

	// Filtered by state: the degraded worker alone.
	var filtered []string
	d.eval(`(() => { const s = document.getElementById("state"); s.value = "degraded"; s.dispatchEvent(new Event("change"));
		return [...document.querySelectorAll("#workers tbody tr")].map(tr => tr.dataset.worker); })()`, &filtered)
	if len(filtered) != 1 || filtered[0] != "3" {
		t.Errorf("filtered on degraded: workers %v, want [3]", filtered)
	}
	if path := os.Getenv("KVROUTER_UI_SCREENSHOT"); path != "" {
		d.eval(`(() => { const s = document.getElementById("state"); s.value = ""; s.dispatchEvent(new Event("change")); return true; })()`, nil)
		if err := os.WriteFile(filepath.Clean(path), d.screenshot(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p := d.seen(); len(p) > 0 {
		t.Errorf("the browser reported errors:\n%s", strings.Join(p, "\n"))
	}
}
