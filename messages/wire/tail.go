package wire

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
