package wire

import (
	"bytes"

	"github.com/zeebo/xxh3"
)

// blockHashes reads the required array of engine hashes.
func (x *Decoder) blockHashes(ev *Event) error {
	n, ok, err := x.arrayOrNil("block_hashes")
	if err != nil {
		return err
	}
	if !ok {
		return malformed("block_hashes is nil, want an array")
	}
	if n > x.lim.MaxHashes {
		if err := x.skipN(n); err != nil {
			return err
		}
		return overLimit("%d block hashes exceed the cap of %d", n, x.lim.MaxHashes)
	}
	start := len(x.hashes)
	var bad fieldErrs
	for i := x.fastHashes(n); i < n; i++ {
		h, err := x.hash("block_hashes")
		if err != nil {
			if err := bad.keep(err); err != nil {
				return err
			}
			continue // a bad hash is left out; the event is rejected anyway
		}
		x.hashes = append(x.hashes, h)
	}
	ev.BlockHashes = x.hashes[start:len(x.hashes):len(x.hashes)]
	if ev.BlockHashes == nil {
		ev.BlockHashes = []uint64{} // present but empty, unlike absent (nil)
	}
	return bad.first
}

// tokenIDs reads token_ids: plain ints, or [a, b] bigram pairs that are
// flattened to a of each pair plus b of the last (n pairs → n+1 tokens).
func (x *Decoder) tokenIDs(ev *Event) error {
	n, ok, err := x.arrayOrNil("token_ids")
	if err != nil || !ok {
		return err
	}
	start := len(x.tokens)
	var bad fieldErrs
	keep := bad.keep
	if n > 0 {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		ev.Bigram = cl == classArray
	}
	if flat := n + boolInt(ev.Bigram && n > 0); flat > x.lim.MaxTokens {
		if err := x.skipN(n); err != nil {
			return err
		}
		return overLimit("%d token ids exceed the cap of %d", flat, x.lim.MaxTokens)
	}
	i := 0
	if !ev.Bigram {
		i = x.fastTokens(n)
	}
	for ; i < n; i++ {
		if !ev.Bigram {
			t, err := x.token()
			if err := keep(err); err != nil {
				return err
			}
			x.tokens = append(x.tokens, t)
			continue
		}
		a, b, err := x.bigram()
		if err := keep(err); err != nil {
			return err
		}
		x.tokens = append(x.tokens, a)
		if i == n-1 {
			x.tokens = append(x.tokens, b)
		}
	}
	ev.Tokens = x.tokens[start:len(x.tokens):len(x.tokens)]
	return bad.first
}

// token reads one token id (an int in [0, 2^32)).
func (x *Decoder) token() (uint32, error) {
	cl, err := x.peek()
	if err != nil {
		return 0, err
	}
	if cl != classInt {
		if err := x.skip(); err != nil {
			return 0, err
		}
		return 0, malformed("token id is a msgpack %s, want an int", cl)
	}
	v, err := x.d.DecodeInt64()
	if err != nil {
		return 0, truncated("token id", err)
	}
	if v < 0 || v > 1<<32-1 {
		return 0, malformed("token id %d is outside [0, 2^32)", v)
	}
	return uint32(v), nil
}

// bigram reads one [a, b] pair (extra elements ignored).
func (x *Decoder) bigram() (a, b uint32, err error) {
	cl, err := x.peek()
	if err != nil {
		return 0, 0, err
	}
	if cl != classArray {
		if err := x.skip(); err != nil {
			return 0, 0, err
		}
		return 0, 0, malformed("token_ids mixes ints and %s pairs", cl)
	}
	n, err := x.arrayLen()
	if err != nil {
		return 0, 0, err
	}
	if n < 2 {
		if err := x.skipN(n); err != nil {
			return 0, 0, err
		}
		return 0, 0, malformed("bigram token pair has %d elements, want 2", n)
	}
	var errA, errB error
	a, errA = x.token()
	if isStructural(errA) {
		return 0, 0, errA
	}
	b, errB = x.token()
	if isStructural(errB) {
		return 0, 0, errB
	}
	if err := x.skipN(n - 2); err != nil {
		return 0, 0, err
	}
	if errA != nil {
		return 0, 0, errA
	}
	return a, b, errB
}

// slot7 reads position 7 / the lora_name or metadata key: a LoRA name (vLLM)
// or SGLang's metadata map.
func (x *Decoder) slot7(st *eventState) error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	switch cl {
	case classNil, classStr:
		st.ev.LoraName, err = x.optString("lora_name")
		return err
	case classMap:
		return x.metadata(st)
	}
	if err := x.skip(); err != nil {
		return err
	}
	return malformed("lora_name/metadata is a msgpack %s, want str, map or nil", cl)
}

// metadata reads SGLang's metadata map (at position 7 in one SGLang layout,
// 14 in a newer one, or under the "metadata" key): cache_salt, session_id,
// lora_name; other keys are skipped.
func (x *Decoder) metadata(st *eventState) error {
	n, err := x.mapLen()
	if err != nil {
		return err
	}
	var bad fieldErrs
	for i := 0; i < n; i++ {
		key, err := x.mapKey()
		if err != nil {
			return err
		}
		switch key {
		case "cache_salt":
			st.metaSalt, err = x.optString("metadata.cache_salt")
		case "session_id":
			st.metaSession, err = x.optString("metadata.session_id")
		case "lora_name":
			st.ev.LoraName, err = x.optString("metadata.lora_name")
		default:
			err = x.skip()
		}
		if err := bad.keep(err); err != nil {
			return err
		}
	}
	return bad.first
}

// saltMarker prefixes a cache salt carried in extra_keys (Dynamo's and
// newer SGLang's convention).
const saltMarker = "dynamo-cache-salt:"

// extraKeys reads extra_keys: nil, or one entry per block that is nil or a
// list of items. vLLM builds each block's items as LoRA name (bare string,
// every block), multimodal items ([identifier, offset] pairs), the cache
// salt (bare string, block 0 only) and prompt-embeds bytes; its typed variant
// sends maps {"type": "mm"|"lora"|"cache_salt"|…, …}. kvrouter reads:
//   - "dynamo-cache-salt:<salt>" (any block) and {"type": "cache_salt",
//     "salt": s}: the cache salt;
//   - a bare string in block 0 that is not the event's lora_name: vLLM's
//     cache salt (resolved once lora_name is known);
//   - [identifier, offset] and {"type": "mm", "hash": h}: a multimodal
//     identifier, folded into the block's mm hashes as XXH3-64(identifier)
//     (an integer hash is taken as is).
//
// Everything else (LoRA names, bare strings past block 0, bytes, numbers,
// other typed items) is opaque and skipped.
func (x *Decoder) extraKeys(st *eventState) error {
	return x.perBlock(st, "extra_keys", func(block int) error {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		switch cl {
		case classStr:
			b, err := x.rawBytes()
			if err != nil {
				return err
			}
			if salt, ok := bytes.CutPrefix(b, []byte(saltMarker)); ok {
				st.setExtraSalt(string(salt))
			} else if block == 0 {
				st.bareExtra = append(st.bareExtra, string(b))
			}
			return nil
		case classArray:
			n, err := x.arrayLen()
			if err != nil {
				return err
			}
			if n >= 1 {
				if c, err := x.peek(); err != nil {
					return err
				} else if c == classStr {
					b, err := x.rawBytes()
					if err != nil {
						return err
					}
					st.ev.addMM(block, hashIdentifier(string(b)))
					n--
				}
			}
			return x.skipN(n)
		case classMap:
			return x.typedExtraKey(st, block)
		}
		return x.skip()
	})
}

// typedExtraKey reads one item of vLLM's typed extra keys.
func (x *Decoder) typedExtraKey(st *eventState, block int) error {
	n, err := x.mapLen()
	if err != nil {
		return err
	}
	var kind, salt, hashStr string
	var hashInt Opt[uint64]
	for i := 0; i < n; i++ {
		key, err := x.mapKeyRaw()
		if err != nil {
			return err
		}
		switch key {
		case "type":
			kind, err = x.optString("extra_keys type")
		case "salt":
			salt, err = x.optString("extra_keys salt")
		case "hash":
			cl, perr := x.peek()
			switch {
			case perr != nil:
				return perr
			case cl == classStr:
				hashStr, err = x.optString("extra_keys hash")
			case cl == classInt || cl == classBin:
				var h uint64
				h, err = x.hash("extra_keys hash")
				hashInt = Opt[uint64]{V: h, Ok: err == nil}
			default:
				err = x.skip()
			}
		default:
			err = x.skip()
		}
		if err != nil {
			return err
		}
	}
	switch kind {
	case "cache_salt":
		st.setExtraSalt(salt)
	case "mm":
		if hashInt.Ok {
			st.ev.addMM(block, hashInt.V)
		} else if hashStr != "" {
			st.ev.addMM(block, hashIdentifier(hashStr))
		}
	}
	return nil
}

// mmInfos reads Dynamo's block_mm_infos: one entry per block, nil or an
// array/map whose first element / "mm_objects" key lists objects, each an
// array/map whose first element / "mm_hash" key is the object's hash.
func (x *Decoder) mmInfos(st *eventState) error {
	return x.perBlock(st, "block_mm_infos", func(block int) error {
		return x.firstOrKey("mm_objects", func() error {
			cl, err := x.peek()
			if err != nil || cl != classArray {
				return firstErr(err, x.skip())
			}
			n, err := x.arrayLen()
			if err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if err := x.firstOrKey("mm_hash", func() error {
					h, err := x.hash("mm_hash")
					if err == nil {
						st.ev.addMM(block, h)
					}
					return err
				}); err != nil {
					return err
				}
				if st.mmItems++; st.mmItems > x.lim.MaxExtraItems {
					return overLimit("more than %d multimodal items", x.lim.MaxExtraItems)
				}
			}
			return nil
		})
	})
}

// perBlock reads nil or an array with one entry per block; each entry is nil
// or an array of items handed to item with the block's index (for mmInfos the
// entry itself is handed over). Field errors in items are kept, the first
// reported.
func (x *Decoder) perBlock(st *eventState, name string, item func(block int) error) error {
	blocks, ok, err := x.arrayOrNil(name)
	if err != nil || !ok {
		return err
	}
	var bad fieldErrs
	keep := bad.keep
	for b := 0; b < blocks; b++ {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		if cl == classNil {
			if err := x.d.DecodeNil(); err != nil {
				return truncated(name, err)
			}
			continue
		}
		if name == "block_mm_infos" {
			if err := keep(item(b)); err != nil {
				return err
			}
			continue
		}
		if cl != classArray {
			if err := keep(firstErr(x.skip(), malformed("%s[%d] is a msgpack %s, want an array", name, b, cl))); err != nil {
				return err
			}
			continue
		}
		n, err := x.arrayLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if st.mmItems++; st.mmItems > x.lim.MaxExtraItems {
				if err := x.skipN(n - i); err != nil {
					return err
				}
				return firstErr(x.skipN(blocks-b-1), overLimit("more than %d %s items", x.lim.MaxExtraItems, name))
			}
			if err := keep(item(b)); err != nil {
				return err
			}
		}
	}
	return bad.first
}

// firstOrKey hands the value's first array element, or its map entry named
// key, to read, and skips the rest of the container. Any other value is
// skipped.
func (x *Decoder) firstOrKey(key string, read func() error) error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	switch cl {
	case classArray:
		n, err := x.arrayLen()
		if err != nil || n == 0 {
			return err
		}
		if err := read(); err != nil {
			return err
		}
		return x.skipN(n - 1)
	case classMap:
		n, err := x.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			k, err := x.mapKeyRaw()
			if err != nil {
				return err
			}
			if k == key {
				err = read()
			} else {
				err = x.skip()
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	return x.skip()
}

// mapKeyRaw reads a map key of any spelling (mapKey only spells known keys).
func (x *Decoder) mapKeyRaw() (string, error) {
	b, err := x.mapKeyBytes()
	return string(b), err
}

// tail reads the positional fields after the fixed prefix: by the fixed
// layout (group_idx, kind, sliding_window, locality, ownership, session_id)
// when every value has that layout's type (or nil), otherwise by type as
// older Dynamo-side layouts did (array → block_mm_infos, first int →
// group_idx, second int → sliding window, first string → kind).
func (x *Decoder) tail(st *eventState, n int) error {
	type value struct {
		cl class
		i  int64
		s  string
	}
	var vals [len(tailLayout)]value
	fixed := true
	for j := 0; j < n; j++ {
		if j >= len(vals) {
			if err := x.skip(); err != nil {
				return err
			}
			continue
		}
		cl, err := x.peek()
		if err != nil {
			return err
		}
		v := value{cl: cl}
		switch cl {
		case classInt:
			o, err := x.optInt("tail", -1<<63)
			if err != nil {
				return err
			}
			v.i = o.V
		case classStr:
			v.s, err = x.optString("tail")
		case classArray:
			err = x.mmInfos(st)
		case classMap:
			if tailLayout[j] == fSessionID {
				err = x.metadata(st) // newer SGLang: the metadata map at 14
			} else {
				err = x.skip()
			}
		case classNil:
			err = x.d.DecodeNil()
		default:
			err = x.skip()
		}
		if err := st.fail(err); err != nil {
			return err
		}
		vals[j] = v
		want := classInt
		if f := tailLayout[j]; f == fKind || f == fLocality || f == fOwnership || f == fSessionID {
			want = classStr
		}
		metaAt14 := cl == classMap && tailLayout[j] == fSessionID
		fixed = fixed && (cl == classNil || cl == want || metaAt14)
	}
	ev := st.ev
	if fixed {
		for j := 0; j < n && j < len(vals); j++ {
			v := vals[j]
			if v.cl == classNil {
				continue
			}
			switch tailLayout[j] {
			case fGroupIdx:
				ev.GroupIdx = Some(v.i)
			case fKind:
				ev.Kind = v.s
			case fSliding:
				ev.SlidingWindow = Some(v.i)
			case fLocality:
				ev.Locality = v.s
			case fOwnership:
				ev.Ownership = v.s
			case fSessionID:
				if ev.Type == TypeStored && v.cl == classStr {
					ev.SessionID = v.s
				}
			}
		}
	} else {
		for _, v := range vals {
			switch {
			case v.cl == classInt && !ev.GroupIdx.Ok:
				ev.GroupIdx = Some(v.i)
			case v.cl == classInt && !ev.SlidingWindow.Ok:
				ev.SlidingWindow = Some(v.i)
			case v.cl == classStr && ev.Kind == "":
				ev.Kind = v.s
			}
		}
	}
	if (ev.GroupIdx.Ok && ev.GroupIdx.V < 0) || (ev.SlidingWindow.Ok && ev.SlidingWindow.V < 0) {
		return malformed("negative group_idx or sliding window in positional tail")
	}
	return nil
}

// addMM records multimodal hash h for block.
func (ev *Event) addMM(block int, h uint64) {
	if len(ev.MM) <= block {
		ev.MM = append(ev.MM, make([][]uint64, block+1-len(ev.MM))...)
	}
	ev.MM[block] = append(ev.MM[block], h)
}

// hashIdentifier turns a multimodal identifier string into the u64 hash
// the block hash folds in.
func hashIdentifier(id string) uint64 {
	return xxh3.HashString(id)
}

// arrayOrNil reads an array header, or nil (ok false). Any other value is
// consumed and reported as malformed.
func (x *Decoder) arrayOrNil(field string) (n int, ok bool, err error) {
	cl, err := x.peek()
	if err != nil {
		return 0, false, err
	}
	switch cl {
	case classNil:
		return 0, false, x.d.DecodeNil()
	case classArray:
		n, err = x.arrayLen()
		return n, err == nil, err
	}
	if err := x.skip(); err != nil {
		return 0, false, err
	}
	return 0, false, malformed("%s is a msgpack %s, want an array or nil", field, cl)
}

// fieldErrs collects the field errors of one container: the first is kept
// for the event, structural errors are handed back to abort the batch.
type fieldErrs struct{ first error }

func (f *fieldErrs) keep(err error) error {
	if isStructural(err) {
		return err
	}
	if f.first == nil {
		f.first = err
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
