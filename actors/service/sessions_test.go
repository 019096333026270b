package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

func (h *harness) do(method, path string) (int, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// route routes tokens (with a session when sess is set) and frees the
// booking at once unless keep: each test decision sees only the load the
// test put there on purpose.
func (h *harness) route(tokens []uint32, sess, id string, keep bool) api.RouteResult {
	h.t.Helper()
	body := map[string]any{"token_ids": tokens, "model_name": "llama", "request_id": id}
	if sess != "" {
		body["session_id"] = sess
	}
	code, out := h.post("/route", body)
	if code != http.StatusOK {
		h.t.Fatalf("route %s: %d %s", id, code, out)
	}
	var res api.RouteResult
	if err := json.Unmarshal(out, &res); err != nil {
		h.t.Fatal(err)
	}
	if !keep {
		if code, out := h.post("/route/"+id+"/free", nil); code != http.StatusOK {
			h.t.Fatalf("free %s: %d %s", id, code, out)
		}
	}
	return res
}

// lineage waits until GET /sessions/{id} shows a lineage of depth blocks
// (the session index follows the physical one by a mailbox hop).
func (h *harness) lineage(id string, depth uint32) api.SessionInfo {
	h.t.Helper()
	var info api.SessionInfo
	eventually.True(h.t, fmt.Sprintf("session %s at depth %d", id, depth), func() (bool, string) {
		code, out := h.do("GET", "/sessions/"+id+"?chain=true")
		info = api.SessionInfo{}
		_ = json.Unmarshal(out, &info)
		return code == http.StatusOK && len(info.Namespaces) == 1 && len(info.Namespaces[0].Lineages) > 0 &&
			info.Namespaces[0].Lineages[0].Depth == depth, fmt.Sprintf("%d %s", code, out)
	})
	return info
}

// A two-turn conversation: turn 2's prompt is turn 1's prompt, the answer
// and a new question. The worker that served turn 1 is busy, so plain
// overlap routing moves turn 2 away; the session's lineage keeps it there.
// A session id reported by one worker never credits another, and DELETE
// forgets the session.
// The reference cost (weight 1): the logits below are its arithmetic,
// without predictions (the plain turn 2 below would predict turn 2 on v).
func TestServeSessionKeepsAConversationOnItsWorker(t *testing.T) {
	h := newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DynamoConfig(), Timeout: time.Second, SessionCredit: 1,
		Predictions: predicted.Config{TTL: predicted.Off}}, 2)
	h.settle()
	turn1 := prompt(1, 6)
	first := h.route(turn1, "conv", "t1", false)
	w := int(first.WorkerID) - 1 // the engine that serves turn 1
	v := 1 - w
	if first.SessionCreditBlocks != 0 {
		t.Errorf("a session with no lineage got credit: %+v", first)
	}
	// The engine caches the prompt and the answer it generated (2 blocks).
	served := append(append([]uint32(nil), turn1...), prompt(2, 2)...)
	if _, err := h.engines[w].ServeRequest(simengine.Request{Tokens: served, SessionID: "conv"}); err != nil {
		t.Fatal(err)
	}
	// A 9-block prompt only worker w holds, routed and kept in flight: 9
	// decode blocks of load on w.
	filler := prompt(3, 9)
	h.engines[w].Serve(filler, "")
	h.settle()
	info := h.lineage("conv", 8)
	l := info.Namespaces[0].Lineages[0]
	if len(info.Namespaces[0].Lineages) != 1 || int(l.WorkerID) != w+1 || l.Blocks != 8 || len(l.Chain) != 8 {
		t.Fatalf("lineage after turn 1: %+v", info)
	}
	if busy := h.route(filler, "", "filler", true); int(busy.WorkerID) != w+1 {
		t.Fatalf("filler routed to %d, want %d", busy.WorkerID, w+1)
	}

	// Turn 2: 10 blocks, 8 of them cached on w (logit 2 + 9 load), none on
	// v (logit 10): plain routing picks v.
	turn2 := append(append([]uint32(nil), served...), prompt(4, 2)...)
	if plain := h.route(turn2, "", "t2-plain", false); int(plain.WorkerID) != v+1 || plain.SessionCreditBlocks != 0 {
		t.Errorf("turn 2 without a session: %+v, want worker %d", plain, v+1)
	}
	// With the session: w's 8-block lineage counts its 2 uncached blocks as
	// held (logit 9): it stays on w, and the answer says so.
	sess := h.route(turn2, "conv", "t2", false)
	if int(sess.WorkerID) != w+1 || sess.OverlapBlocks != 8 || sess.CachedTokens != 32 || sess.SessionCreditBlocks != 2 {
		t.Errorf("turn 2 with its session: %+v, want worker %d, overlap 8, credit 2", sess, w+1)
	}

	// Scoping: v serves the same conversation without a session id (same
	// engine hashes): the lineage stays w's alone.
	h.engines[v].Serve(served, "")
	h.settle()
	info = h.lineage("conv", 8)
	if n := len(info.Namespaces[0].Lineages); n != 1 || int(info.Namespaces[0].Lineages[0].WorkerID) != w+1 {
		t.Errorf("lineage after v served the same blocks unattributed: %+v", info)
	}

	// Forget: the session routes as if it had none; a second DELETE and a
	// GET find nothing.
	if code, out := h.do("DELETE", "/sessions/conv"); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, out)
	}
	for _, m := range []string{"DELETE", "GET"} {
		if code, out := h.do(m, "/sessions/conv"); code != http.StatusNotFound || !strings.Contains(string(out), "unknown_session") {
			t.Errorf("%s after delete: %d %s", m, code, out)
		}
	}
	if after := h.route(turn2, "conv", "t2-forgotten", false); after.SessionCreditBlocks != 0 {
		t.Errorf("forgotten session credited: %+v", after)
	}
}

// A session's lineage only ever credits the worker that reported it: once
// that worker is unregistered, the session routes like any request, even
// though another worker holds the same blocks.
func TestServeSessionCreditStaysWithItsWorker(t *testing.T) {
	h := newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second, SessionCredit: 1}, 2)
	p := prompt(5, 6)
	if _, err := h.engines[0].ServeRequest(simengine.Request{Tokens: p, SessionID: "s-a"}); err != nil {
		t.Fatal(err)
	}
	h.engines[1].Serve(p, "")
	h.settle()
	h.lineage("s-a", 6)
	next := append(append([]uint32(nil), p...), prompt(6, 2)...)
	if r := h.route(next, "s-a", "a1", false); r.WorkerID != 1 || r.SessionCreditBlocks != 2 {
		t.Errorf("with worker 1 registered: %+v", r)
	}
	if code, out := h.post("/unregister", map[string]any{"instance_id": 1, "model_name": "llama"}); code != http.StatusOK {
		t.Fatalf("unregister: %d %s", code, out)
	}
	if r := h.route(next, "s-a", "a2", false); r.WorkerID != 2 || r.SessionCreditBlocks != 0 || r.OverlapBlocks != 6 {
		t.Errorf("worker 2 was credited with worker 1's session: %+v", r)
	}
}

// Session ids are untrusted: bounded in length and charset, 400 otherwise.
func TestServeRejectsInvalidSessionIDs(t *testing.T) {
	h := newHarnessWith(t, Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second, SessionCredit: 1}, 1)
	h.settle()
	for _, id := range []string{"has space", "tab\there", strings.Repeat("x", 257), "é"} {
		code, out := h.post("/route", map[string]any{"token_ids": prompt(7, 2), "model_name": "llama", "session_id": id})
		if code != http.StatusBadRequest || !strings.Contains(string(out), "invalid_session_id") {
			t.Errorf("route with session %q: %d %s", id, code, out)
		}
	}
	for _, path := range []string{"/sessions/has%20space", "/sessions/" + strings.Repeat("x", 257)} {
		for _, m := range []string{"GET", "DELETE"} {
			if code, out := h.do(m, path); code != http.StatusBadRequest || !strings.Contains(string(out), "invalid_session_id") {
				t.Errorf("%s %s: %d %s", m, path[:min(len(path), 30)], code, out)
			}
		}
	}
	// A valid id the router has never seen routes as without one.
	if r := h.route(prompt(7, 2), "never-seen", "n1", false); r.SessionCreditBlocks != 0 {
		t.Errorf("unknown session credited: %+v", r)
	}
}
