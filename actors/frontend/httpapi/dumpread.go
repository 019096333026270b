package httpapi

// Reading a dump back (kvrouter's or the reference indexer's), for
// --bootstrap-from.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

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
