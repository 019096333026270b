package service

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// Every answered route is in the decision log, newest first, with the
// scores a request asked for; its booked load is in GET /loads until freed.
func TestDecisionsAndLoads(t *testing.T) {
	h := newHarness(t, 2)
	eventually.True(t, "both engines heard", func() (bool, string) {
		for _, e := range h.engines {
			_ = e.Publish()
		}
		ws, err := h.svc.Workers(context.Background())
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, w := range ws {
			for _, r := range w.Ranks {
				if r.LastSeq != nil {
					n++
				}
			}
		}
		return n == 2, "streams heard"

	})
	h.engines[1].Serve(prompt(5, 6), "")
	var routed api.RouteResult
	eventually.True(t, "the prompt routed to the engine holding it", func() (bool, string) {
		code, body := h.post("/route", map[string]any{"token_ids": prompt(5, 6), "model_name": "llama", "include_scores": true})
		if code != http.StatusOK {
			t.Fatalf("route: %d %s", code, body)
		}
		_ = json.Unmarshal(body, &routed)
		return routed.WorkerID == 2 && routed.OverlapBlocks == 6, string(body)
	})
	log := h.svcDecisions(t)
	d := log.Decisions[0]
	if d.WorkerID != 2 || d.OverlapBlocks != 6 || d.CachedTokens != 24 || d.PromptTokens != 24 || d.ModelName != "llama" ||
		d.Candidates != 2 || len(d.Scores) != 2 || d.Scores[0].WorkerID != 2 || d.Scores[0].Logit > d.Scores[1].Logit {
		t.Errorf("newest decision %+v", d)
	}
	if log.Recorded != uint64(len(log.Decisions)) || log.Capacity <= 0 {
		t.Errorf("log %d recorded, %d kept, capacity %d", log.Recorded, len(log.Decisions), log.Capacity)
	}
	loads, err := h.svc.Loads(context.Background(), api.LoadsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	booked, routedTo := map[uint64]uint64{}, map[uint64]uint64{}
	for _, ns := range loads {
		if ns.ModelName == "llama" {
			for _, l := range ns.Loads {
				if l.ActiveRequests > 0 {
					booked[uint64(l.WorkerID)] += l.ActiveRequests
				}
			}
		}
	}
	for _, d := range log.Decisions {
		routedTo[uint64(d.WorkerID)]++
	}
	if len(booked) != len(routedTo) || booked[1] != routedTo[1] || booked[2] != routedTo[2] {
		t.Errorf("booked %v, routed %v: %+v", booked, routedTo, loads)
	}
}

func (h *harness) svcDecisions(t *testing.T) api.DecisionLog {
	t.Helper()
	log, err := h.svc.Decisions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return log
}

func TestWorkerInfoNamesEachStreamsNamespace(t *testing.T) {
	h := newHarness(t, 2)
	var b strings.Builder
	if err := h.svc.WorkerInfo(&b); err != nil {
		t.Fatal(err)
	}
	want := "# HELP kvrouter_worker_info 1 for each registered stream, labelled with its namespace (model, tenant).\n" +
		"# TYPE kvrouter_worker_info gauge\n" +
		`kvrouter_worker_info{worker="1",dp_rank="0",model="llama",tenant="default"} 1` + "\n" +
		`kvrouter_worker_info{worker="2",dp_rank="0",model="llama",tenant="default"} 1` + "\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if got := labelValue.Replace("a\"b\\c\nd"); got != `a\"b\\c\nd` {
		t.Errorf("escaped %q", got)
	}
}
