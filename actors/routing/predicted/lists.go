package predicted

// The entries' storage and LRU lists.

func (t *Table) evict(i int32) {
	t.stats.Evicted++
	t.remove(i)
}

// remove drops entry i from every structure and frees it.
func (t *Table) remove(i int32) {
	e := &t.entries[i]
	t.unlink(i)
	t.pairs.Delete(pairKey(e.hash, e.key))
	if e.first {
		if e.hprev != none {
			t.entries[e.hprev].hnext = e.hnext
		} else if e.hnext != none {
			t.chains[e.hash] = e.hnext
		} else {
			delete(t.chains, e.hash)
		}
		if e.hnext != none {
			t.entries[e.hnext].hprev = e.hprev
		}
	}
	if e.confirmed {
		if w := t.workers[e.key]; w != nil {
			delete(w.ext, e.ext)
			if len(w.ext) == 0 && w.list == none {
				delete(t.workers, e.key) // an event-publishing worker keeps no state without predictions
			}
		}
	}
	*e = entry{}
	t.free = append(t.free, i)
}

func (t *Table) alloc() int32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	t.entries = append(t.entries, entry{})
	return int32(len(t.entries) - 1)
}

func (t *Table) newList(capacity int) int32 {
	l := lru{head: none, tail: none, capacity: capacity, ttl: t.cfg.EventLessTTL}
	if n := len(t.freeLs); n > 0 {
		i := t.freeLs[n-1]
		t.freeLs = t.freeLs[:n-1]
		t.lists[i] = l
		return i
	}
	t.lists = append(t.lists, l)
	return int32(len(t.lists) - 1)
}

func (t *Table) pushFront(li, i int32) {
	l := &t.lists[li]
	e := &t.entries[i]
	e.list, e.prev, e.next = li, none, l.head
	if l.head != none {
		t.entries[l.head].prev = i
	} else {
		l.tail = i
	}
	l.head = i
	l.n++
}

func (t *Table) unlink(i int32) {
	e := &t.entries[i]
	l := &t.lists[e.list]
	if e.prev != none {
		t.entries[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next != none {
		t.entries[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = none, none
	l.n--
}
