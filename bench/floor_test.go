package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/zeebo/xxh3"
)

// wireBatch is one engine batch of a wire-path run, in arrival order.
type wireBatch struct {
	worker  int
	payload []byte
}

// interleave orders the engines' batches round-robin, as batches of many
// engines arrive at the router.
func interleave(loads []engineLoad) (batches []wireBatch, blocks int) {
	for r := 0; ; r++ {
		more := false
		for w, l := range loads {
			if r < len(l.payloads) {
				batches = append(batches, wireBatch{w, l.payloads[r]})
				more = true
			}
		}
		if !more {
			break
		}
	}
	for _, l := range loads {
		blocks += l.blocks
	}
	return batches, blocks
}

// BenchmarkWirePath runs, in one process and one goroutine (one core), the
// router's wire path — wire.Decoder → normalizer.Normalizer (filter, local
// hashes) → coalescer.Stream → radix.Tree.Apply, the stages the ingest
// actors run, without the actors — beside its floor: a minimal msgpack
// reader, XXH3 per block and one insert (or delete) in a presized Go map
// per (block, worker) entry. Both replay the same vLLM 0.26 batches (the
// first requests of the Mooncake conversation trace served by simulated
// engines, sessions tagged), alternately, each from an empty state; the
// figures are stored blocks per second of process CPU time and the ratio
// wire/floor.
func BenchmarkWirePath(b *testing.B) {
	const requests, blockSize = 12000, 16
	for _, workers := range []int{16, 1000} {
		loads := prepareLoads(b, workers, requests, blockSize, true)
		batches, blocks := interleave(loads)
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var floorT, wireT time.Duration
			for range b.N {
				start := cpuTime(b)
				if err := floorRun(batches, blocks, blockSize); err != nil {
					b.Fatal(err)
				}
				floorT += cpuTime(b) - start
				start = cpuTime(b)
				wireRun(b, batches, workers, blockSize)
				wireT += cpuTime(b) - start
			}
			n := float64(b.N * blocks)
			b.ReportMetric(n/floorT.Seconds(), "floor-blocks/cpu-s")
			b.ReportMetric(n/wireT.Seconds(), "wire-blocks/cpu-s")
			b.ReportMetric(floorT.Seconds()/wireT.Seconds(), "wire/floor")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system, every
// thread: the loop's goroutine and the garbage collector's work for it).
// On a shared machine it leaves out the time the process waited for a
// core, which wall-clock time would charge to whichever loop was running.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// wirePath is the router's ingest stages as plain values: per worker a
// decoder, a normalizer and a coalescer, as in the pipeline, then one
// index tree and, when set, the session index following it.
type wirePath struct {
	decs     []*wire.Decoder
	norms    []*normalizer.Normalizer
	cos      []*coalescer.Stream
	tree     *radix.Tree
	sessions *sessions.Index
	outs     []normalizer.Outcome
	evs      []messages.RouterEvent
}

func newWirePath(workers, blockSize int, withSessions bool) *wirePath {
	p := &wirePath{tree: radix.New(radix.Config{})}
	scratch := new(normalizer.Scratch) // shared, as the normalizer actor's streams share theirs
	for w := range workers {
		p.decs = append(p.decs, wire.NewDecoder(wire.DefaultLimits(), nil))
		p.norms = append(p.norms, normalizer.New(normalizer.Config{Worker: messages.WorkerID(w + 1), BlockSize: blockSize, Scratch: scratch}))
		p.cos = append(p.cos, coalescer.New(messages.WorkerKey{Worker: messages.WorkerID(w + 1)}, coalescer.Config{}))
	}
	if withSessions {
		p.sessions = sessions.New(sessions.Config{})
	}
	return p
}

// apply takes one engine batch through every stage.
func (p *wirePath) apply(tb testing.TB, bt wireBatch) {
	batch, err := p.decs[bt.worker].Decode(bt.payload)
	if err != nil {
		tb.Fatal(err)
	}
	p.outs = p.norms[bt.worker].Batch(batch, p.outs[:0])
	p.evs = p.evs[:0]
	for _, o := range p.outs {
		if !o.Accepted() {
			tb.Fatalf("worker %d: rejected: %v %s", bt.worker, o.Reason, o.Detail)
		}
		p.evs = p.cos[bt.worker].Push(o.Event, p.evs)
	}
	p.evs = p.cos[bt.worker].Flush(p.evs)
	for _, ev := range p.evs {
		p.tree.Apply(ev)
	}
	if p.sessions != nil {
		for _, ev := range p.evs {
			p.sessions.Apply(ev, time.Time{})
		}
	}
}

// wireRun applies every batch through the router's stages, from an empty
// index.
func wireRun(b *testing.B, batches []wireBatch, workers, blockSize int) {
	p := newWirePath(workers, blockSize, false)
	for _, bt := range batches {
		p.apply(b, bt)
	}
}

// floorRun is the floor: the same batches through a minimal reader that
// knows vLLM's map events, XXH3 of each block's tokens and one map insert
// (store) or delete (remove) per (block, worker) entry, into a map presized
// for every stored block.
func floorRun(batches []wireBatch, blocks, blockSize int) error {
	m := make(map[uint64]uint64, blocks)
	var hashes []uint64
	var tokens []uint32
	for _, bt := range batches {
		worker := uint64(bt.worker+1) * 0x9e3779b97f4a7c15
		r := mpReader{buf: bt.payload}
		r.arrayLen() // [ts, events, dp_rank]
		r.skip()
		for range r.arrayLen() {
			stored := false
			hashes, tokens = hashes[:0], tokens[:0]
			for range r.mapLen() {
				switch string(r.str()) {
				case "type":
					stored = string(r.str()) == "BlockStored"
				case "block_hashes":
					for range r.arrayLen() {
						hashes = append(hashes, r.uint())
					}
				case "token_ids":
					for range r.arrayLen() {
						tokens = append(tokens, uint32(r.uint()))
					}
				default:
					r.skip()
				}
			}
			for i, h := range hashes {
				if !stored {
					delete(m, h^worker)
					continue
				}
				block := tokens[i*blockSize : (i+1)*blockSize]
				m[h^worker] = xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(&block[0])), 4*blockSize), uint64(blockhash.DefaultSeed))
			}
		}
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// mpReader is the floor's msgpack reader: the few types vLLM's batches use,
// no limits, no interning; a malformed input sets err and reads zeros.
type mpReader struct {
	buf []byte
	err error
}

var errShort = errors.New("floor: short or unknown msgpack")

func (r *mpReader) next(n int) []byte {
	if r.err != nil || len(r.buf) < n {
		r.err = errShort
		return make([]byte, n)
	}
	p := r.buf[:n]
	r.buf = r.buf[n:]
	return p
}

func (r *mpReader) byte() byte { return r.next(1)[0] }

// length reads a container or string header of the fix form whose type
// bits are fix (mask its bits) or of the 8/16/32-bit forms at c8, c16, c32.
func (r *mpReader) length(c byte, fix, mask byte, c8, c16, c32 byte) int {
	switch {
	case c&^mask == fix:
		return int(c & mask)
	case c == c8 && c8 != 0:
		return int(r.byte())
	case c == c16:
		return int(binary.BigEndian.Uint16(r.next(2)))
	case c == c32:
		return int(binary.BigEndian.Uint32(r.next(4)))
	}
	r.err = errShort
	return 0
}

func (r *mpReader) arrayLen() int { return r.length(r.byte(), 0x90, 0x0f, 0, 0xdc, 0xdd) }
func (r *mpReader) mapLen() int   { return r.length(r.byte(), 0x80, 0x0f, 0, 0xde, 0xdf) }
func (r *mpReader) str() []byte   { return r.next(r.length(r.byte(), 0xa0, 0x1f, 0xd9, 0xda, 0xdb)) }

func (r *mpReader) uint() uint64 {
	switch c := r.byte(); {
	case c < 0x80:
		return uint64(c)
	case c == 0xcc:
		return uint64(r.byte())
	case c == 0xcd:
		return uint64(binary.BigEndian.Uint16(r.next(2)))
	case c == 0xce:
		return uint64(binary.BigEndian.Uint32(r.next(4)))
	case c == 0xcf:
		return binary.BigEndian.Uint64(r.next(8))
	}
	r.err = errShort
	return 0
}

// skip skips one value of any type the batches use.
func (r *mpReader) skip() {
	c := r.byte()
	switch {
	case c < 0x80 || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
	case c&0xf0 == 0x90 || c == 0xdc || c == 0xdd:
		for range r.length(c, 0x90, 0x0f, 0, 0xdc, 0xdd) {
			r.skip()
		}
	case c&0xf0 == 0x80 || c == 0xde || c == 0xdf:
		for range 2 * r.length(c, 0x80, 0x0f, 0, 0xde, 0xdf) {
			r.skip()
		}
	case c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb:
		r.next(r.length(c, 0xa0, 0x1f, 0xd9, 0xda, 0xdb))
	case c == 0xcc || c == 0xd0:
		r.next(1)
	case c == 0xcd || c == 0xd1:
		r.next(2)
	case c == 0xce || c == 0xd2 || c == 0xca:
		r.next(4)
	case c == 0xcf || c == 0xd3 || c == 0xcb:
		r.next(8)
	default:
		r.err = errShort
	}
}
