package simengine

// node is one cached block, linked into the LRU list.
type node struct {
	Block
	children   int // cached blocks whose parent this is
	prev, next *node
}

// lruList is an intrusive doubly linked list of nodes around a sentinel:
// front = most recently used, back = next to evict.
type lruList struct {
	root node
	len  int
}

func (l *lruList) init() {
	l.root.next, l.root.prev = &l.root, &l.root
	l.len = 0
}

// back returns the least recently used node, or nil when empty.
func (l *lruList) back() *node {
	if l.len == 0 {
		return nil
	}
	return l.root.prev
}

// prevOf returns the node in front of n (more recently used), or nil.
func (l *lruList) prevOf(n *node) *node {
	if n.prev == &l.root {
		return nil
	}
	return n.prev
}

// insertAfter links n right behind mark; a nil mark means the front.
func (l *lruList) insertAfter(mark, n *node) {
	if mark == nil {
		mark = &l.root
	}
	n.prev, n.next = mark, mark.next
	mark.next.prev = n
	mark.next = n
	l.len++
}

func (l *lruList) remove(n *node) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
	l.len--
}

func (l *lruList) moveToFront(n *node) {
	if l.root.next == n {
		return
	}
	l.remove(n)
	l.insertAfter(nil, n)
}
