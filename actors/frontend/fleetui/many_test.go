//go:build browser

package fleetui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// fleet is a Backend of n workers (one rank each, worker i holding i
// blocks, every 10th degraded) for the page's reads; the page calls no
// other method (the embedded nil Backend would panic).
type fleet struct {
	api.Backend
	api.Selector // GET /loads: Loads alone
	n            int
}

func (f fleet) Workers(context.Context) ([]api.WorkerInfo, error) {
	out := make([]api.WorkerInfo, f.n)
	for i := range out {
		seq := uint64(i)
		st := api.StateExact
		if i%10 == 0 {
			st = api.StateDegraded
		}
		out[i] = api.WorkerInfo{InstanceID: messages.WorkerID(i + 1), Ranks: []api.RankInfo{{ModelName: "m", TenantID: "t",
			State: st, Blocks: uint64(i + 1), LastSeq: &seq, Endpoint: fmt.Sprintf("tcp://10.0.%d.%d:5557", i/256, i%256)}}}
	}
	return out, nil
}

func (f fleet) Loads(context.Context, api.LoadsFilter) ([]api.NamespaceLoads, error) {
	return []api.NamespaceLoads{{ModelName: "m", RoutingGroup: "t",
		Loads: []api.PotentialLoad{{WorkerID: 7, PotentialPrefillTokens: 900, PotentialDecodeBlocks: 40, ActiveRequests: 2}}}}, nil
}

func (f fleet) Decisions(context.Context) (api.DecisionLog, error) {
	return api.DecisionLog{Capacity: 256, Decisions: []api.Decision{}}, nil
}

// A thousand workers: one page of rows at a time, sorted by a column,
// filtered by text and by state, paged.
func TestFleetPageWithAThousandWorkers(t *testing.T) {
	srv := httptest.NewServer(httpapi.New(fleet{n: 1000}, httpapi.Options{}))
	t.Cleanup(srv.Close)
	d := startBrowser(t)
	d.navigate(srv.URL + "/ui")
	waitPolls(d, 1)
	type shown struct {
		Workers []string
		Page    string
	}
	look := func(js string) shown {
		t.Helper()
		var s shown
		d.eval(`(() => {`+js+`; return {Workers: [...document.querySelectorAll("#workers tbody tr")].map(tr => tr.dataset.worker),
			Page: document.getElementById("page").textContent}; })()`, &s)
		return s
	}
	s := look(``)
	if len(s.Workers) != 50 || s.Workers[0] != "1" || s.Workers[49] != "50" || s.Page != "page 1 of 20 (1000 of 1000 ranks)" {
		t.Errorf("first page: %d rows %v…, %q", len(s.Workers), s.Workers[:min(3, len(s.Workers))], s.Page)
	}
	s = look(`document.getElementById("next").click()`)
	if s.Workers[0] != "51" || s.Page != "page 2 of 20 (1000 of 1000 ranks)" {
		t.Errorf("next page: %v…, %q", s.Workers[:1], s.Page)
	}
	// Sorted by blocks, twice: descending.
	s = look(`const th = document.querySelector('#workers th[data-key="blocks"]'); th.click(); th.click()`)
	if s.Workers[0] != "1000" || s.Workers[1] != "999" {
		t.Errorf("by blocks, descending: %v…", s.Workers[:2])
	}
	s = look(`const f = document.getElementById("filter"); f.value = "10.0.3.23:"; f.dispatchEvent(new Event("input"))`)
	if len(s.Workers) != 1 || s.Workers[0] != "792" || s.Page != "page 1 of 1 (1 of 1000 ranks)" {
		t.Errorf("filtered on an endpoint: %v, %q", s.Workers, s.Page)
	}
	s = look(`const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input"));
		const st = document.getElementById("state"); st.value = "degraded"; st.dispatchEvent(new Event("change"))`)
	if len(s.Workers) != 50 || s.Page != "page 1 of 2 (100 of 1000 ranks)" || s.Workers[0] != "991" {
		t.Errorf("degraded only: %d rows %v…, %q", len(s.Workers), s.Workers[:min(1, len(s.Workers))], s.Page)
	}
	var load string
	d.eval(`(() => { const st = document.getElementById("state"); st.value = ""; st.dispatchEvent(new Event("change"));
		const f = document.getElementById("filter"); f.value = "10.0.0.6:"; f.dispatchEvent(new Event("input"));
		return document.querySelector("#workers tbody tr").cells[6].textContent; })()`, &load)
	if load != "900" {
		t.Errorf("worker 7's booked prefill tokens shown as %q, want 900 (from /loads)", load)
	}
	if p := d.seen(); len(p) > 0 {
		t.Errorf("the browser reported errors: %v", p)
	}
}
