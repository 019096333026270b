package wire

// tail reads the positional fields after the fixed prefix: by the fixed
// layout (group_idx, kind, sliding_window, locality, ownership, session_id)
// when every value has that layout's type (or nil), otherwise by type as
// older Dynamo-side layouts did (array → block_mm_infos, first int →
// group_idx, second int → sliding window, first string → kind).
func (x *Decoder) tail(st *eventState, n int) error {
	type value struct {
		cl  class
		i   int64
		s   string
		err error // a field error of this value, judged once the layout is known
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
			v.s, err = x.optString(tailName(j))
			if err != nil && !isStructural(err) {
				v.err, err = err, nil
			}
		case classArray:
			err = x.mmInfos(st)
		case classMap:
			if tailLayout[j] == fSessionID {
				err = x.metadata(st) // newer SGLang: the metadata map at 14
			} else {
				err = x.skip()
			}
		case classNil:
			err = x.decodeNil()
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
			if v.err != nil {
				// An unusable string: a hint's is dropped, the kind's or
				// locality's rejects the event.
				if h, ok := hintOf(tailLayout[j]); ok {
					_ = st.drop(h, v.err)
				} else {
					_ = st.fail(v.err)
				}
				continue
			}
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
			case v.err != nil:
				_ = st.fail(v.err) // by type, an unusable string may have been the kind
			case v.cl == classInt && !ev.GroupIdx.Ok:
				ev.GroupIdx = Some(v.i)
			case v.cl == classInt && !ev.SlidingWindow.Ok:
				ev.SlidingWindow = Some(v.i)
			case v.cl == classStr && ev.Kind == "":
				ev.Kind = v.s
			}
		}
	}
	if ev.SlidingWindow.Ok && ev.SlidingWindow.V < 0 {
		_ = st.drop(HintSlidingWindow, malformed("kv_cache_spec_sliding_window %d is negative", ev.SlidingWindow.V))
		ev.SlidingWindow = Opt[int64]{}
	}
	if ev.GroupIdx.Ok && ev.GroupIdx.V < 0 {
		return malformed("negative group_idx %d in positional tail", ev.GroupIdx.V)
	}
	return nil
}

// tailName names tail position j's field in the fixed layout, for details.
func tailName(j int) string {
	if j < len(tailLayout) {
		switch tailLayout[j] {
		case fKind:
			return "kv_cache_spec_kind"
		case fLocality:
			return "locality"
		case fOwnership:
			return "ownership"
		case fSessionID:
			return "session_id"
		}
	}
	return "tail"
}
