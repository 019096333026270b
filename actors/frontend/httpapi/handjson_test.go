package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// routeBodyOf is a plain /route body of n tokens, as the benchmarks send.
func routeBodyOf(n int) string {
	var sb strings.Builder
	sb.WriteString(`{"model_name":"llama","tenant_id":"acme","session_id":"s","token_ids":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprint(&sb, 100000+i*37)
	}
	sb.WriteString(`]}`)
	return sb.String()
}

// BenchmarkRouteBody measures reading a 1024-token /route body three ways:
// the one-pass fast path (fastDecode), encoding/json with token_ids'
// hand-written array parser (the general path), and encoding/json alone
// (token_ids as a plain []uint32, decoded by reflection).
func BenchmarkRouteBody(b *testing.B) {
	body := []byte(routeBodyOf(1024))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var rb routeBody
			if !fastDecode(body, &rb) || len(rb.TokenIDs) != 1024 {
				b.Fatal("the fast path refused a plain body")
			}
		}
	})
	b.Run("encoding-json+int-parser", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var rb routeBody
			if err := json.Unmarshal(body, &rb); err != nil || len(rb.TokenIDs) != 1024 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var rb struct {
				TokenIDs  []uint32 `json:"token_ids"`
				ModelName *string  `json:"model_name"`
				TenantID  *string  `json:"tenant_id"`
				SessionID *string  `json:"session_id"`
			}
			if err := json.Unmarshal(body, &rb); err != nil || len(rb.TokenIDs) != 1024 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDumpEvent measures writing one /dump event (a stored event of
// 16 blocks, with a session) by appendRouterEvent and by encoding/json
// marshalling the same serde shape.
func BenchmarkDumpEvent(b *testing.B) {
	ev := messages.RouterEvent{WorkerID: 7, StorageTier: messages.TierDevice, SessionID: "s1",
		Event: messages.KvCacheEvent{EventID: 41, Kind: messages.KindStored, HasParent: true, ParentHash: 99}}
	for i := range 16 {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(1000 + i), TokensHash: messages.LocalHash(5000 + i)})
	}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendRouterEvent(buf[:0], ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	type block struct {
		BlockHash  uint64 `json:"block_hash"`
		TokensHash uint64 `json:"tokens_hash"`
	}
	type stored struct {
		ParentHash *uint64 `json:"parent_hash"`
		Blocks     []block `json:"blocks"`
	}
	type event struct {
		EventID uint64            `json:"event_id"`
		Data    map[string]stored `json:"data"`
		DpRank  uint32            `json:"dp_rank"`
	}
	type routerEvent struct {
		WorkerID    uint64 `json:"worker_id"`
		StorageTier string `json:"storage_tier"`
		Event       event  `json:"event"`
		SessionID   string `json:"session_id,omitempty"`
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parent := uint64(ev.Event.ParentHash)
			s := stored{ParentHash: &parent, Blocks: make([]block, len(ev.Event.Blocks))}
			for i, blk := range ev.Event.Blocks {
				s.Blocks[i] = block{uint64(blk.BlockHash), uint64(blk.TokensHash)}
			}
			out := routerEvent{WorkerID: uint64(ev.WorkerID), StorageTier: routerevent.TierName(ev.StorageTier),
				Event: event{EventID: ev.Event.EventID, Data: map[string]stored{"stored": s}, DpRank: uint32(ev.Event.DpRank)}, SessionID: ev.SessionID}
			if _, err := json.Marshal(out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
