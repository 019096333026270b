package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrNotBatch is returned (wrapped) when a payload is not a KV-event batch
// at all; the whole message is dropped and counted.
var ErrNotBatch = errors.New("not a kv-event batch")

// Decoder decodes batches. It reuses its buffers between calls, so it is
// cheap to keep one per goroutine and must not be shared between goroutines.
// The zero value is not usable: call NewDecoder.
type Decoder struct {
	lim     Limits
	fold    FoldBin
	payload []byte
	pos     int          // the next byte of payload to read
	r       bytes.Reader // the library's reader, positioned at pos for each call (lib)
	d       *msgpack.Decoder

	batch   Batch
	hashes  []uint64 // arena for Event.BlockHashes
	tokens  []uint32 // arena for Event.Tokens
	copies  []uint32 // arena for Event.RemainingCopies
	stopped bool     // an event broke the stream: nothing after it can be read
}

// NewDecoder returns a decoder with the given limits; a nil fold means
// FoldLast8. Zero limits take DefaultLimits' value.
func NewDecoder(lim Limits, fold FoldBin) *Decoder {
	def := DefaultLimits()
	for _, p := range []struct{ v, d *int }{
		{&lim.MaxEvents, &def.MaxEvents}, {&lim.MaxHashes, &def.MaxHashes},
		{&lim.MaxTokens, &def.MaxTokens}, {&lim.MaxStringBytes, &def.MaxStringBytes},
		{&lim.MaxExtraItems, &def.MaxExtraItems},
	} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	if fold == nil {
		fold = FoldLast8
	}
	x := &Decoder{lim: lim, fold: fold}
	x.d = msgpack.NewDecoder(&x.r)
	return x
}

// Decode decodes one batch payload. The returned batch and its events point
// into the decoder's buffers and are valid until the next call. An error
// (wrapping ErrNotBatch) means the payload is not a batch; otherwise every
// declared event is in Events, each accepted or carrying its Reason, except
// the Lost ones after a truncation.
func (x *Decoder) Decode(payload []byte) (*Batch, error) {
	x.payload, x.pos = payload, 0
	x.r.Reset(payload)
	x.d.ResetReader(&x.r)
	x.hashes = x.hashes[:0]
	x.tokens = x.tokens[:0]
	x.copies = x.copies[:0]
	clear(x.batch.Events)
	x.batch = Batch{Events: x.batch.Events[:0]}
	x.stopped = false
	if len(payload) == 0 {
		return nil, fmt.Errorf("%w: empty payload", ErrNotBatch)
	}
	cl, err := x.peek()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotBatch, err)
	}
	switch cl {
	case classArray:
		err = x.arrayBatch()
	case classMap:
		err = x.mapBatch()
	default:
		err = fmt.Errorf("payload is a msgpack %s, want an array or map", cl)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotBatch, err)
	}
	return &x.batch, nil
}

// arrayBatch decodes [ts, events, rank?, …].
func (x *Decoder) arrayBatch() error {
	n, err := x.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return fmt.Errorf("batch array has %d elements, want at least 2 (ts, events)", n)
	}
	if err := x.timestamp(); err != nil {
		return err
	}
	if err := x.events(); err != nil {
		return err
	}
	if n >= 3 && !x.stopped {
		if err := x.rank(); err != nil {
			return err
		}
		return x.ignoreRest(n - 3)
	}
	return nil
}

// mapBatch decodes {ts, events, data_parallel_rank}.
func (x *Decoder) mapBatch() error {
	n, err := x.mapLen()
	if err != nil {
		return err
	}
	sawEvents := false
	for i := 0; i < n && !x.stopped; i++ {
		key, err := x.mapKey()
		if err != nil {
			return err
		}
		switch key {
		case "ts":
			err = x.timestamp()
		case "events":
			if sawEvents {
				return errors.New("batch map has two events keys")
			}
			sawEvents, err = true, x.events()
		case "data_parallel_rank", "dp_rank", "attn_dp_rank":
			err = x.rank()
		default:
			err = x.skip()
		}
		if err != nil {
			return err
		}
	}
	if !sawEvents {
		return errors.New("batch map has no events key")
	}
	return nil
}

// ignoreRest skips elements past the ones kvrouter reads; once the events
// are in hand, damage there does not undo them.
func (x *Decoder) ignoreRest(n int) error {
	_ = x.skipN(n)
	return nil
}

// timestamp reads the batch's ts. A value that is not a number is a
// dropped hint (HintTimestamp), not a reason to lose the batch.
func (x *Decoder) timestamp() error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	switch cl {
	case classFloat, classInt:
		ts, err := lib(x, (*msgpack.Decoder).DecodeFloat64)
		if err != nil {
			return truncated("batch timestamp", err)
		}
		if !math.IsNaN(ts) && !math.IsInf(ts, 0) {
			x.batch.TS = ts // a non-finite ts is kept as 0: it only feeds lag figures
		}
		return nil
	case classNil:
		return x.decodeNil()
	}
	x.batch.Dropped = x.batch.Dropped.With(HintTimestamp)
	return x.skip()
}

func (x *Decoder) rank() error {
	r, err := x.optInt("data_parallel_rank", 0)
	if err != nil {
		return rankErr(err)
	}
	x.batch.DpRank = r
	return nil
}

// rankErr words a batch rank's field error as the batch's own (its own
// function: the error target escapes, and a batch with a good rank makes
// no allocation).
func rankErr(err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("batch rank: %v", fe)
	}
	return err
}

// events decodes the events array; structural damage inside an event ends
// the batch there (that event marked, the rest counted as Lost).
func (x *Decoder) events() error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	if cl != classArray {
		return fmt.Errorf("batch events is a %s, want an array", cl)
	}
	n, err := x.arrayLen()
	if err != nil {
		return err
	}
	if n > x.lim.MaxEvents {
		return fmt.Errorf("batch declares %d events, over the cap of %d", n, x.lim.MaxEvents)
	}
	if cap(x.batch.Events) < n {
		x.batch.Events = make([]Event, 0, n)
	}
	for i := 0; i < n; i++ {
		x.batch.Events = append(x.batch.Events, Event{})
		ev := &x.batch.Events[i]
		err := x.event(ev)
		if err == nil {
			continue
		}
		var se *structuralError
		if !errors.As(err, &se) {
			return err
		}
		ev.Reason, ev.Detail = se.reason, se.detail
		x.batch.Lost = n - i - 1
		x.stopped = true // the position in the payload is unknown from here on
		return nil
	}
	return nil
}

// mapKey reads a map key as the shared spelling of a known key, or "" for
// keys kvrouter does not read and non-string keys (every caller's default
// branch skips their value).
func (x *Decoder) mapKey() (string, error) {
	b, err := x.mapKeyBytes()
	return keyString(b), err
}

// keyField reads an event's map key as the field it names (fIgnore for keys
// kvrouter does not read and non-string keys). A fixstr key, what engines
// send, is looked up in place.
func (x *Decoder) keyField() (field, error) {
	if b, ok := x.fixstr(); ok {
		return keyField(b), nil
	}
	b, err := x.mapKeyBytes()
	return keyField(b), err
}

// mapKeyBytes reads a map key's bytes (valid until the next read); a
// non-string or over-long key comes back empty.
func (x *Decoder) mapKeyBytes() ([]byte, error) {
	cl, err := x.peek()
	if err != nil {
		return nil, err
	}
	if cl != classStr {
		return nil, x.skip()
	}
	b, err := x.rawBytes()
	if err != nil && isStructural(err) {
		return nil, err
	}
	return b, nil
}
