package wire

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
		if cl == classStr {
			// TensorRT-LLM's KV cache manager V2 sends a multimodal token
			// as its digest (mmkeys.go): kvrouter cannot hash that block
			// as it hashes a prompt's tokens.
			return 0, malformed("token id is a string (a multimodal token digest, as TensorRT-LLM sends it): its block cannot be hashed from token ids")
		}
		return 0, malformed("token id is a msgpack %s, want an int", cl)
	}
	v, err := x.decodeInt64()
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
	x.batch.Layout |= LayoutMetadata
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
			err = st.drop(HintSessionID, err)
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

// mapKeyRaw reads a map key of any spelling (mapKey only spells known keys).
func (x *Decoder) mapKeyRaw() (string, error) {
	b, err := x.mapKeyBytes()
	return string(b), err
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
		return 0, false, x.decodeNil()
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
