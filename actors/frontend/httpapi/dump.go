package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// The dump (GET /dump) is ONE JSON document in the reference indexer's
// shape, an object keyed "<model_name>:<tenant_id>":
//
//	{
//	"llama:default":{"model_name":"llama","tenant_id":"default","block_size":16,
//	"streams":[{"worker_id":1,"dp_rank":0,"endpoint":"tcp://10.0.0.5:5557","seq":41,"exact":true}],"events":[
//	{"worker_id":1,"storage_tier":"device","event":{"event_id":1,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":22}]}},"dp_rank":0}},
//	{"worker_id":1,"storage_tier":"device","event":{"event_id":2,"data":{"removed":{"block_hashes":[11]}},"dp_rank":0},"session_id":"s1"},
//	{"worker_id":2,"storage_tier":"host_pinned","event":{"event_id":1,"data":"cleared","dp_rank":1}}
//	]}
//	}
//
// Each event is Dynamo's RouterEvent as serde_json writes it (storage tiers
// by Dynamo's names, "cleared" as a bare string, session_id only when set),
// one per line so that the document also greps and diffs well. model_name
// and tenant_id are kvrouter's additions: the key alone is ambiguous when a
// name holds ':' (a reader of the reference ignores them); so is streams
// (DumpStream: registrations and positions, for --bootstrap-from). It is written
// while the Backend produces it, through a 64 KiB buffer, so memory stays
// flat however large the index; the price is that a failure after the first
// bytes can only cut the connection (the document is then invalid, never
// silently short). ReadDump reads this document back and also the
// reference's own dumps (no model_name/tenant_id: the key is split at its
// last ':').

// dumpWriter is the DumpSink behind GET /dump.
type dumpWriter struct {
	bw     *bufio.Writer
	buf    []byte // one item being encoded
	open   bool   // the document's '{' is out
	inNS   bool   // inside a namespace's events array
	events int    // events in the current namespace
	seen   map[[2]string]bool
	werr   error // a write failed: the client went away
	failed error // the api.Backend broke the sink's contract
}

func newDumpWriter(w io.Writer) *dumpWriter {
	return &dumpWriter{bw: bufio.NewWriterSize(w, 64<<10), seen: map[[2]string]bool{}}
}

func (d *dumpWriter) fail(format string, args ...any) error {
	d.failed = fmt.Errorf("dump: "+format, args...)
	return d.failed
}

func (d *dumpWriter) err() error {
	if d.failed != nil {
		return d.failed
	}
	return d.werr
}

func (d *dumpWriter) write(b []byte) error {
	if _, err := d.bw.Write(b); err != nil {
		d.werr = err
	}
	return d.werr
}

// Namespace implements DumpSink.
func (d *dumpWriter) Namespace(ns api.DumpNamespace) error {
	if err := d.err(); err != nil {
		return err
	}
	switch id := [2]string{ns.ModelName, ns.TenantID}; {
	case ns.ModelName == "" || ns.TenantID == "":
		return d.fail("namespace with an empty model_name or tenant_id")
	case ns.BlockSize == 0:
		return d.fail("namespace %q/%q with block size 0", ns.ModelName, ns.TenantID)
	case d.seen[id]:
		return d.fail("namespace %q/%q dumped twice", ns.ModelName, ns.TenantID)
	default:
		d.seen[id] = true
	}
	b := d.buf[:0]
	switch {
	case !d.open:
		b = append(b, '{')
		d.open = true
	case d.inNS:
		b = append(b, "\n]},"...)
	}
	b = append(b, '\n')
	b = appendJSONString(b, ns.ModelName+":"+ns.TenantID)
	b = append(b, `:{"model_name":`...)
	b = appendJSONString(b, ns.ModelName)
	b = append(b, `,"tenant_id":`...)
	b = appendJSONString(b, ns.TenantID)
	b = append(b, `,"block_size":`...)
	b = strconv.AppendUint(b, uint64(ns.BlockSize), 10)
	b, err := appendStreams(b, ns.Streams)
	if err != nil {
		return d.fail("%v", err)
	}
	b = append(b, `,"events":[`...)
	d.buf = b
	d.inNS, d.events = true, 0
	return d.write(b)
}

// Event implements DumpSink.
func (d *dumpWriter) Event(ev messages.RouterEvent) error {
	if err := d.err(); err != nil {
		return err
	}
	if !d.inNS {
		return d.fail("event before any namespace")
	}
	b := d.buf[:0]
	if d.events > 0 {
		b = append(b, ',')
	}
	b = append(b, '\n')
	b, err := appendRouterEvent(b, ev)
	if err != nil {
		return d.fail("%v", err)
	}
	d.buf = b
	d.events++
	return d.write(b)
}

// close ends the document and flushes it.
func (d *dumpWriter) close() error {
	if err := d.err(); err != nil {
		return err
	}
	switch {
	case !d.open:
		_ = d.write([]byte("{}\n"))
	case d.inNS:
		_ = d.write([]byte("\n]}\n}\n"))
	}
	if d.werr == nil {
		d.werr = d.bw.Flush()
	}
	return d.werr
}

// appendRouterEvent appends ev as Dynamo's serde_json RouterEvent.
func appendRouterEvent(b []byte, ev messages.RouterEvent) ([]byte, error) {
	tier := routerevent.TierName(ev.StorageTier)
	if tier == "" {
		return b, fmt.Errorf("event of worker %d: unknown storage tier %d", ev.WorkerID, ev.StorageTier)
	}
	b = append(b, `{"worker_id":`...)
	b = strconv.AppendUint(b, uint64(ev.WorkerID), 10)
	b = append(b, `,"storage_tier":"`...)
	b = append(b, tier...)
	b = append(b, `","event":{"event_id":`...)
	b = strconv.AppendUint(b, ev.Event.EventID, 10)
	b = append(b, `,"data":`...)
	switch ev.Event.Kind {
	case messages.KindStored:
		b = append(b, `{"stored":{"parent_hash":`...)
		if ev.Event.HasParent {
			b = strconv.AppendUint(b, uint64(ev.Event.ParentHash), 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"blocks":[`...)
		for i, blk := range ev.Event.Blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"block_hash":`...)
			b = strconv.AppendUint(b, uint64(blk.BlockHash), 10)
			b = append(b, `,"tokens_hash":`...)
			b = strconv.AppendUint(b, uint64(blk.TokensHash), 10)
			b = append(b, '}')
		}
		b = append(b, "]}}"...)
	case messages.KindRemoved:
		b = append(b, `{"removed":{"block_hashes":[`...)
		for i, h := range ev.Event.Removed {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(h), 10)
		}
		b = append(b, "]}}"...)
	case messages.KindCleared:
		b = append(b, `"cleared"`...)
	default:
		return b, fmt.Errorf("event %d of worker %d: unknown kind %d", ev.Event.EventID, ev.WorkerID, ev.Event.Kind)
	}
	b = append(b, `,"dp_rank":`...)
	b = strconv.AppendUint(b, uint64(ev.Event.DpRank), 10)
	b = append(b, '}')
	if ev.SessionID != "" {
		b = append(b, `,"session_id":`...)
		b = appendJSONString(b, ev.SessionID)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// ReadDump reads a dump document (kvrouter's or the reference indexer's)
// from r and feeds it to sink, in document order, as it goes: a router
// bootstrapping from a peer applies the events while the rest still
// streams. A namespace the peer reported as failed ({"error": …}), a
// malformed event or a truncated document is an error; events already fed
// stay fed, so a caller that needs all-or-nothing clears what it built.
func ReadDump(r io.Reader, sink api.DumpSink) error {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return fmt.Errorf("read dump: %w", err)
	}
	for dec.More() {
		key, err := stringToken(dec)
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if err := readNamespace(dec, key, sink); err != nil {
			return fmt.Errorf("read dump: namespace %q: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fmt.Errorf("read dump: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("read dump: data after the document")
	}
	return nil
}

func readNamespace(dec *json.Decoder, key string, sink api.DumpSink) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var ns api.DumpNamespace
	started := false
	for dec.More() {
		field, err := stringToken(dec)
		if err != nil {
			return err
		}
		switch field {
		case "model_name", "tenant_id", "block_size":
			if started {
				return fmt.Errorf("%s after events", field)
			}
			var dst any = &ns.ModelName
			switch field {
			case "tenant_id":
				dst = &ns.TenantID
			case "block_size":
				dst = &ns.BlockSize
			}
			if err := dec.Decode(dst); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
		case "streams":
			if started {
				return errors.New("streams after events")
			}
			if ns.Streams, err = readStreams(dec); err != nil {
				return err
			}
		case "error":
			var msg string
			_ = dec.Decode(&msg)
			return fmt.Errorf("the peer could not dump it: %s", clip(msg))
		case "events":
			if started {
				return errors.New("events twice")
			}
			started = true
			if ns.ModelName == "" || ns.TenantID == "" {
				m, t := splitNamespaceKey(key)
				ns.ModelName = cmp.Or(ns.ModelName, m)
				ns.TenantID = cmp.Or(ns.TenantID, t)
			}
			if ns.BlockSize == 0 {
				return errors.New("no block_size before the events")
			}
			if err := sink.Namespace(ns); err != nil {
				return err
			}
			if err := readEvents(dec, sink); err != nil {
				return err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return err
	}
	if !started {
		return errors.New("no events")
	}
	return nil
}

// splitNamespaceKey splits the reference's "<model>:<tenant>" key at its
// last ':' (tenant DefaultTenant when there is none).
func splitNamespaceKey(key string) (model, tenant string) {
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return key, api.DefaultTenant
}

func readEvents(dec *json.Decoder, sink api.DumpSink) error {
	if err := expectDelim(dec, '['); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := 0; dec.More(); i++ {
		var de dumpEvent
		if err := dec.Decode(&de); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		ev, err := de.routerEvent()
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if err := sink.Event(ev); err != nil {
			return err
		}
	}
	if err := expectDelim(dec, ']'); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

// dumpEvent is Dynamo's RouterEvent in serde_json form, as read back.
type dumpEvent struct {
	WorkerID    *uint64 `json:"worker_id"`
	StorageTier *string `json:"storage_tier"`
	Event       *struct {
		EventID uint64          `json:"event_id"`
		Data    json.RawMessage `json:"data"`
		DpRank  uint32          `json:"dp_rank"`
	} `json:"event"`
	SessionID string `json:"session_id"`
}

type dumpStored struct {
	ParentHash *uint64 `json:"parent_hash"`
	Blocks     []struct {
		BlockHash  *uint64 `json:"block_hash"`
		TokensHash *uint64 `json:"tokens_hash"`
	} `json:"blocks"`
}

type dumpRemoved struct {
	BlockHashes []uint64 `json:"block_hashes"`
}

func (de *dumpEvent) routerEvent() (messages.RouterEvent, error) {
	var ev messages.RouterEvent
	if de.WorkerID == nil || de.Event == nil {
		return ev, errors.New("worker_id and event are required")
	}
	ev.WorkerID = messages.WorkerID(*de.WorkerID)
	if de.StorageTier != nil { // absent: Device, serde's default
		t, ok := routerevent.ParseTier(*de.StorageTier)
		if !ok {
			return ev, fmt.Errorf("unknown storage_tier %q", clip(*de.StorageTier))
		}
		ev.StorageTier = t
	}
	if de.SessionID != routerevent.UnattributedSessionID {
		ev.SessionID = de.SessionID
	}
	ev.Event.EventID = de.Event.EventID
	ev.Event.DpRank = messages.DpRank(de.Event.DpRank)
	data := bytes.TrimSpace(de.Event.Data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil || s != "cleared" {
			return ev, fmt.Errorf("unknown event data %s", clip(string(data)))
		}
		ev.Event.Kind = messages.KindCleared
		return ev, nil
	}
	var variant map[string]json.RawMessage
	if err := json.Unmarshal(data, &variant); err != nil || len(variant) != 1 {
		return ev, fmt.Errorf("event data must be \"cleared\" or an object with one of stored, removed")
	}
	if raw, ok := variant["stored"]; ok {
		var st dumpStored
		if err := json.Unmarshal(raw, &st); err != nil {
			return ev, fmt.Errorf("stored: %w", err)
		}
		ev.Event.Kind = messages.KindStored
		if st.ParentHash != nil {
			ev.Event.HasParent, ev.Event.ParentHash = true, messages.ExternalHash(*st.ParentHash)
		}
		ev.Event.Blocks = make([]messages.StoredBlock, len(st.Blocks))
		for i, blk := range st.Blocks {
			if blk.BlockHash == nil || blk.TokensHash == nil {
				return ev, fmt.Errorf("stored: block %d needs block_hash and tokens_hash", i)
			}
			ev.Event.Blocks[i] = messages.StoredBlock{
				BlockHash:  messages.ExternalHash(*blk.BlockHash),
				TokensHash: messages.LocalHash(*blk.TokensHash),
			}
		}
		return ev, nil
	}
	if raw, ok := variant["removed"]; ok {
		var rm dumpRemoved
		if err := json.Unmarshal(raw, &rm); err != nil {
			return ev, fmt.Errorf("removed: %w", err)
		}
		ev.Event.Kind = messages.KindRemoved
		ev.Event.Removed = make([]messages.ExternalHash, len(rm.BlockHashes))
		for i, h := range rm.BlockHashes {
			ev.Event.Removed[i] = messages.ExternalHash(h)
		}
		return ev, nil
	}
	if _, ok := variant["cleared"]; ok {
		ev.Event.Kind = messages.KindCleared
		return ev, nil
	}
	return ev, errors.New("event data must be \"cleared\" or an object with one of stored, removed")
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("want %q: %w", want, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}

func stringToken(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want an object key, got %v", tok)
	}
	return s, nil
}
