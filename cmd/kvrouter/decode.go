package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/wire"
)

const decodeHelp = `Usage: kvrouter decode [flags] < payload

Decodes one engine KV-event batch (the third ZeroMQ frame an engine
publishes: a msgpack [ts, events, dp_rank]) and prints one JSON object per
event, in order:

  type               the wire tag as sent ("BlockStored", …; null if none)
  accepted           whether kvrouter would index the event
  reason             why not ("" when accepted): malformed, unknown_tag,
                     non_main_attention_kind, block_size_mismatch, no_tokens, …
  detail             a human-readable explanation of the reason
  dp_rank            the batch's data-parallel rank (or --dp-rank)
  block_hashes       the engine's block hashes, as unsigned 64-bit numbers
  parent_block_hash  the engine's parent hash, or null
  tokens_hashes      kvrouter's local hash of each accepted block
  session_id, group_idx, kv_cache_spec_kind, medium, lora_name, cache_salt,
  locality, ownership, block_size, tokens, tier
                     the event's fields (null when absent)
  remaining_copy_counts, removed
                     a BlockRemoved's copies the engine still holds per hash
                     (newer vLLM; absent otherwise) and the hashes kvrouter
                     removes: those with no copy left
  dropped_hints      optional fields left out because their value was unusable
                     (invalid_session_id, invalid_ownership, …; the event is
                     kept), with hint_detail saying what was wrong

A payload that is not a batch at all exits with status 1 and a one-line
reason on stderr. Events lost after a truncation are reported on stderr.

Examples:
  kvrouter decode --hex < cmd/kvrouter/samples/vllm-map.hex
  kvrouter decode --sample sglang-positional
  kvrouter decode --samples          # list the built-in sample payloads

Flags:
`

// decodedEvent is one line of `kvrouter decode` output.
type decodedEvent struct {
	Type          *string  `json:"type"`
	Accepted      bool     `json:"accepted"`
	Reason        string   `json:"reason"`
	Detail        string   `json:"detail,omitempty"`
	DpRank        uint32   `json:"dp_rank"`
	BlockHashes   []uint64 `json:"block_hashes"`
	ParentHash    *uint64  `json:"parent_block_hash"`
	TokensHashes  []uint64 `json:"tokens_hashes"`
	SessionID     *string  `json:"session_id"`
	GroupIdx      *int64   `json:"group_idx"`
	Kind          *string  `json:"kv_cache_spec_kind"`
	Medium        *string  `json:"medium"`
	LoraName      *string  `json:"lora_name"`
	CacheSalt     *string  `json:"cache_salt"`
	Locality      *string  `json:"locality"`
	Ownership     *string  `json:"ownership"`
	BlockSize     *int64   `json:"block_size"`
	Tokens        int      `json:"tokens"`
	Tier          *string  `json:"tier"`
	SlidingWindow *int64   `json:"kv_cache_spec_sliding_window,omitempty"`
	// RemainingCopies and Removed: a BlockRemoved's copies left per hash,
	// when the engine sends them, and the hashes the index removes.
	RemainingCopies []uint32 `json:"remaining_copy_counts,omitempty"`
	Removed         []uint64 `json:"removed,omitempty"`
	// DroppedHints are the optional fields whose value was unusable and
	// left out (invalid_session_id, …); the event itself is judged without them.
	DroppedHints []string `json:"dropped_hints,omitempty"`
	HintDetail   string   `json:"hint_detail,omitempty"`
}

func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter decode", decodeHelp, stderr)
	blockSize := fs.Int("block-size", 0, "expected tokens per block; events declaring another size are rejected (0: trust each event)")
	hexIn := fs.Bool("hex", false, "stdin is hex text (whitespace ignored) instead of raw msgpack")
	worker := fs.Uint64("worker", 0, "worker id to attribute events to")
	dpRank := fs.Uint("dp-rank", 0, "dp rank for batches that carry none")
	engineName := fs.String("engine", "vllm", "engine adapter: "+strings.Join(engine.Names(), ", "))
	sample := fs.String("sample", "", "decode a built-in sample payload instead of stdin")
	list := fs.Bool("samples", false, "list the built-in sample payloads and exit")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *list {
		for _, s := range samples() {
			fmt.Fprintf(stdout, "%-20s %s\n", s.name, s.about)
		}
		return 0
	}
	adapter, err := engine.Lookup(*engineName)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter decode: %v\n", err)
		return 2
	}
	payload, err := readPayload(stdin, *hexIn, *sample)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter decode: %v\n", err)
		return 1
	}
	batch, err := adapter.NewDecoder(wire.DefaultLimits()).Decode(payload)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter decode: %v\n", err)
		return 1
	}
	norm := normalizer.New(normalizer.Config{
		Worker:    messages.WorkerID(*worker),
		DpRank:    messages.DpRank(*dpRank),
		BlockSize: *blockSize,
	})
	outcomes := norm.Batch(batch, nil)
	enc := json.NewEncoder(stdout)
	for i := range batch.Events {
		if err := enc.Encode(describe(&batch.Events[i], outcomes[i], batch, messages.DpRank(*dpRank))); err != nil {
			fmt.Fprintf(stderr, "kvrouter decode: writing output: %v\n", err)
			return 1
		}
	}
	if batch.Lost > 0 {
		fmt.Fprintf(stderr, "kvrouter decode: %d further events lost: the batch is truncated after event %d\n",
			batch.Lost, len(batch.Events))
	}
	return 0
}

// readPayload reads the batch bytes from a sample or stdin.
func readPayload(stdin io.Reader, hexIn bool, sample string) ([]byte, error) {
	if sample != "" {
		s, ok := findSample(sample)
		if !ok {
			return nil, fmt.Errorf("no sample named %q (see --samples)", sample)
		}
		return s.payload, nil
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	if len(raw) > maxPayload {
		return nil, fmt.Errorf("payload is larger than %d bytes", maxPayload)
	}
	if !hexIn {
		return raw, nil
	}
	text := strings.Join(strings.Fields(string(raw)), "")
	payload, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("stdin is not hex: %w", err)
	}
	return payload, nil
}

// maxPayload bounds what decode reads from stdin (engines' batches are far
// smaller).
const maxPayload = 64 << 20

// describe turns one wire event and its outcome into an output line.
func describe(ev *wire.Event, o normalizer.Outcome, b *wire.Batch, defRank messages.DpRank) decodedEvent {
	d := decodedEvent{
		Accepted:     o.Accepted(),
		Reason:       o.Reason.String(),
		Detail:       o.Detail,
		DpRank:       uint32(defRank),
		BlockHashes:  append([]uint64{}, ev.BlockHashes...),
		TokensHashes: []uint64{},
		SessionID:    nonEmpty(ev.SessionID),
		Kind:         nonEmpty(ev.Kind),
		Medium:       nonEmpty(ev.Medium),
		LoraName:     nonEmpty(ev.LoraName),
		CacheSalt:    nonEmpty(ev.CacheSalt),
		Locality:     nonEmpty(ev.Locality),
		Ownership:    nonEmpty(ev.Ownership),
		Type:         nonEmpty(ev.Tag),
		Tokens:       len(ev.Tokens),
	}
	if b.DpRank.Ok {
		d.DpRank = uint32(b.DpRank.V)
	}
	if ev.Parent.Ok {
		d.ParentHash = &ev.Parent.V
	}
	d.GroupIdx = optPtr(ev.GroupIdx)
	d.BlockSize = optPtr(ev.BlockSize)
	d.SlidingWindow = optPtr(ev.SlidingWindow)
	for h := wire.Hint(0); h < wire.HintCount; h++ {
		if ev.Dropped.Has(h) {
			d.DroppedHints = append(d.DroppedHints, h.Reason())
		}
	}
	d.HintDetail = ev.DroppedDetail
	if o.Accepted() {
		for _, blk := range o.Event.Event.Blocks {
			d.TokensHashes = append(d.TokensHashes, uint64(blk.TokensHash))
		}
		if o.Event.Event.Kind != messages.KindCleared {
			tier := o.Event.Placement.Tier.String()
			d.Tier = &tier
		}
		if ev.RemainingCopies != nil {
			d.RemainingCopies = append([]uint32{}, ev.RemainingCopies...)
			d.Removed = []uint64{}
			for _, h := range o.Event.Event.Removed {
				d.Removed = append(d.Removed, uint64(h))
			}
		}
	}
	return d
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optPtr(o wire.Opt[int64]) *int64 {
	if !o.Ok {
		return nil
	}
	v := o.V
	return &v
}
