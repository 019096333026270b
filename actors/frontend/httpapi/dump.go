package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
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
