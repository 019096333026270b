package loadgen

import (
	"strconv"
	"testing"
)

// outsideReqs is n requests of 256 tokens over 40 conversations (each
// turn repeats its conversation's first 128 tokens), every 5th request a
// burst sibling 1 ms after the previous one.
func outsideReqs(n int) []Request {
	reqs := make([]Request, n)
	for i := range reqs {
		conv := i % 40
		toks := make([]uint32, 256)
		for k := range toks {
			if k < 128 {
				toks[k] = uint32(conv*1000 + k + 1)
			} else {
				toks[k] = uint32(1_000_000 + i*1000 + k)
			}
		}
		reqs[i] = Request{Tokens: toks, Session: "c" + strconv.Itoa(conv)}
		if i%5 == 4 {
			reqs[i].Follows = 1_000_000 // 1 ms
		}
	}
	return reqs
}

func TestMixOutsideSharePromptsAndSpread(t *testing.T) {
	reqs := outsideReqs(2000)
	mixed, err := MixOutside(reqs, OutsideLoad{Fraction: 0.3, Seed: 1}, 16)
	if err != nil {
		t.Fatal(err)
	}
	perWorker := make([]int, 16)
	outside, routed := 0, 0
	for i, a := range mixed {
		if !a.Outside {
			if &reqs[routed].Tokens[0] != &a.Tokens[0] {
				t.Fatalf("routed request %d out of order", routed)
			}
			routed++
			continue
		}
		outside++
		perWorker[a.Worker]++
		for _, tok := range a.Tokens {
			if tok&outsideTokenMask == 0 {
				t.Fatalf("outside request %d shares token %d with the routed prompts", i, tok)
			}
		}
		if i+1 < len(mixed) && mixed[i+1].Follows > 0 {
			t.Fatalf("outside request %d split a burst", i)
		}
	}
	if routed != len(reqs) {
		t.Fatalf("%d routed requests, want %d", routed, len(reqs))
	}
	if share := float64(outside) / float64(len(mixed)); share < 0.29 || share > 0.31 {
		t.Fatalf("outside share %.3f, want 0.3", share)
	}
	lo, hi := perWorker[0], perWorker[0]
	for _, n := range perWorker {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi < 3*max(lo, 1) {
		t.Fatalf("outside requests per worker %v: not uneven", perWorker)
	}
	if m, _ := MixOutside(reqs, OutsideLoad{}, 16); len(m) != len(reqs) {
		t.Fatalf("no outside load gave %d arrivals for %d requests", len(m), len(reqs))
	}
	if _, err := MixOutside(reqs, OutsideLoad{Fraction: 0.95}, 16); err == nil {
		t.Fatal("fraction 0.95 accepted")
	}
}

// seeing wraps a policy and records, per pick, whether some engine's
// load included requests the policy did not route.
type seeing struct {
	Policy
	picks, sawOutside int
}

func (s *seeing) Pick(q Query) int {
	s.picks++
	for w := range q.Fleet.Workers() {
		if q.Fleet.Load(w).Running > q.Fleet.Own(w).Running {
			s.sawOutside++
			break
		}
	}
	return s.Policy.Pick(q)
}

func TestReplayMixedAppliesOutsideLoad(t *testing.T) {
	reqs := outsideReqs(1500)
	mixed, err := MixOutside(reqs, OutsideLoad{Fraction: 0.3, Seed: 1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	outside := len(mixed) - len(reqs)
	rq := requestsOf(mixed)
	gap := ArrivalGap(rq, 8)
	cc := CacheConfig{Workers: 8, BlockSize: 16, Capacity: 256, InFlight: 16, Gap: gap, Arrivals: ArrivalTimes(rq, gap), Delay: DefaultEventDelay()}
	var sees [2]*Core
	var picks [2][]int
	for i, signals := range []bool{false, true} {
		k, err := NewKVRouterCore(8, signals)
		if err != nil {
			t.Fatal(err)
		}
		sees[i] = k
		p := &seeing{Policy: &recording{Policy: k, picks: &picks[i]}}
		tl, err := ReplayMixed(mixed, p, cc)
		if err != nil {
			t.Fatal(err)
		}
		if p.picks != len(reqs) {
			t.Fatalf("the policy routed %d requests, want the %d routed ones (never the %d outside)", p.picks, len(reqs), outside)
		}
		if p.sawOutside == 0 {
			t.Fatal("no engine's load ever included an outside request")
		}
		total := 0
		for _, n := range tl.Requests {
			total += n
		}
		if total != len(reqs) || len(tl.TTFT) != len(reqs) || len(tl.OutsideTTFT) != outside {
			t.Fatalf("tally: %d requests, %d TTFTs, %d outside TTFTs; want %d, %d, %d", total, len(tl.TTFT), len(tl.OutsideTTFT), len(reqs), len(reqs), outside)
		}
	}
	// Without signals kvrouter sees no outside load; with them it does,
	// and it decides differently.
	if got := sees[0].r.OutsideLoads(nil); len(got) != 0 {
		t.Fatalf("signals off: outside loads %v", got)
	}
	var seen int64
	for _, o := range sees[1].r.OutsideLoads(nil) {
		seen += o.Outside.Requests
	}
	if seen == 0 {
		t.Fatal("signals on: no outside requests observed at the last scrape")
	}
	same := 0
	for i := range picks[0] {
		if picks[0][i] == picks[1][i] {
			same++
		}
	}
	if same == len(picks[0]) {
		t.Fatal("signals on and off made the same decisions")
	}
}

// recording appends every pick to picks.
type recording struct {
	Policy
	picks *[]int
}

func (r *recording) Pick(q Query) int {
	w := r.Policy.Pick(q)
	*r.picks = append(*r.picks, w)
	return w
}
