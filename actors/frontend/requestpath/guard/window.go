package guard

import "time"

// windowBuckets is the resolution of a Window: its span in this many
// buckets, the oldest dropped as time passes.
const windowBuckets = 10

// Window counts successes and failures over the last Span, in
// windowBuckets buckets (a sliding window accurate to a bucket). The
// zero value with a Span is ready; a Span of 0 keeps no history.
type Window struct {
	Span    time.Duration
	buckets [windowBuckets]bucketCount
}

type bucketCount struct {
	slot      int64 // which bucket-length slot of time it counts
	good, bad uint64
}

func (w *Window) slot(now time.Time) int64 {
	size := int64(w.Span) / windowBuckets
	if size <= 0 {
		size = 1
	}
	return now.UnixNano() / size
}

// Add counts one outcome at now.
func (w *Window) Add(now time.Time, good bool) {
	if w.Span <= 0 {
		return
	}
	s := w.slot(now)
	b := &w.buckets[s%windowBuckets]
	if b.slot != s {
		*b = bucketCount{slot: s}
	}
	if good {
		b.good++
	} else {
		b.bad++
	}
}

// Counts are the successes and failures counted in the window ending at
// now.
func (w *Window) Counts(now time.Time) (good, bad uint64) {
	if w.Span <= 0 {
		return 0, 0
	}
	s := w.slot(now)
	for _, b := range w.buckets {
		if b.slot > s-windowBuckets && b.slot <= s {
			good += b.good
			bad += b.bad
		}
	}
	return good, bad
}

// Reset forgets every count.
func (w *Window) Reset() { w.buckets = [windowBuckets]bucketCount{} }
