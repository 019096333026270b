package simengine

import (
	"bytes"
	"context"
	"testing"
)

// A recording is what the engine would have published serving the same
// prompts from empty, then an AllBlocksCleared: a router-side index built
// from every payload but the last equals a cache that served them, and the
// last empties it.
func TestRecordMatchesServing(t *testing.T) {
	const bs = 4
	drv := func() Driver {
		d, err := NewRandomDriver(RandomConfig{Seed: 5, BlockSize: bs, Prefixes: 4, MaxPrefixBlocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	e := newTestEngine(t, Options{BlockSize: bs, CapacityBlocks: 40, HashSeed: 9}, false)
	rec, err := e.Record(drv(), 300)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Blocks < 300 || len(rec.Payloads) != len(rec.Stored) || rec.Requests == 0 {
		t.Fatalf("recording: %d blocks, %d payloads, %d counts, %d prompts", rec.Blocks, len(rec.Payloads), len(rec.Stored), rec.Requests)
	}
	truth, _ := NewCache(Config{BlockSize: bs, CapacityBlocks: 40, HashSeed: 9})
	d := drv()
	for range rec.Requests {
		p, _ := d.Next()
		truth.ServeRequest(Request{Tokens: p.Tokens})
	}
	sum := 0
	for _, n := range rec.Stored {
		sum += n
	}
	if sum != rec.Blocks || uint64(sum) != truth.Stats().StoredBlocks {
		t.Fatalf("stored blocks: %d counted, %d in all, the cache stored %d", sum, rec.Blocks, truth.Stats().StoredBlocks)
	}
	idx := newIndex(t, EncodingVLLMMap, bs)
	for _, p := range rec.Payloads[:len(rec.Payloads)-1] {
		idx.apply(p)
	}
	idx.equal(truth.Contents(), bs)
	idx.apply(rec.Payloads[len(rec.Payloads)-1])
	if len(idx.held) != 0 {
		t.Fatalf("after the last batch the index holds %d blocks, want the clear to empty it", len(idx.held))
	}
	if len(e.Contents().Blocks) != 0 {
		t.Fatalf("recording touched the engine's cache: %d blocks", len(e.Contents().Blocks))
	}
}

// Publishing a recording sends its payloads in a loop, each with the next
// seq in vLLM's frames, counts their stored blocks and keeps them for
// replay like any batch.
func TestRunRecordingPublishesInALoop(t *testing.T) {
	e := newTestEngine(t, Options{Topic: "kv", BlockSize: 4, CapacityBlocks: 16}, true)
	d, _ := NewRandomDriver(RandomConfig{Seed: 2, BlockSize: 4, Prefixes: 2, MaxPrefixBlocks: 4})
	rec, err := e.Record(d, 20)
	if err != nil {
		t.Fatal(err)
	}
	sub := subscribe(t, e.Endpoint(), "kv")
	waitJoined(t, e, sub)
	first := e.Stats().NextSeq
	n := 2*len(rec.Payloads) + 1
	if err := e.RunRecording(context.Background(), rec, RunConfig{Requests: n}); err != nil {
		t.Fatal(err)
	}
	want := uint64(0)
	for i := range n {
		m := sub.next(t)
		if seq := seqOf(t, m); seq != first+uint64(i) || string(m.Frames[0]) != "kv" {
			t.Fatalf("batch %d: topic %q seq %d, want kv and %d", i, m.Frames[0], seq, first+uint64(i))
		}
		if !bytes.Equal(m.Frames[2], rec.Payloads[i%len(rec.Payloads)]) {
			t.Fatalf("batch %d is not recorded payload %d", i, i%len(rec.Payloads))
		}
		want += uint64(rec.Stored[i%len(rec.Payloads)])
	}
	if st := e.Stats(); st.SentBlocks != want || st.NextSeq != first+uint64(n) {
		t.Fatalf("stats %+v: want %d sent blocks, next seq %d", st, want, first+uint64(n))
	}
	got := replayAll(t, dealer(t, e.ReplayEndpoint()), first+1, false, "kv")
	if len(got) != n-1 || got[0].Seq != first+1 || !bytes.Equal(got[0].Payload, rec.Payloads[1]) {
		t.Fatalf("replay from %d: %d batches, want %d starting with recorded payload 1", first+1, len(got), n-1)
	}
}
