package indexer

import (
	"sync"
	"testing"
)

// Every scheduled run runs, whether a parked worker takes it or a new one
// does, from many goroutines at once, and after stop as well.
func TestWorkersRunEverything(t *testing.T) {
	w := newWorkers(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	run := func() {
		mu.Lock()
		ran++
		mu.Unlock()
		wg.Done()
	}
	for range 8 {
		wg.Add(100)
		go func() {
			for range 100 {
				w.Schedule(run)
			}
		}()
	}
	wg.Wait()
	w.stop()
	wg.Add(10)
	for range 10 {
		w.Schedule(run)
	}
	wg.Wait()
	if ran != 810 {
		t.Errorf("%d runs, want 810", ran)
	}
}
