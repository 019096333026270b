package simengine

// ServeDeferred serves r on the cache like ServeRequest but publishes
// nothing: it returns the events for PublishEvents to send later. A real
// engine publishes a request's BlockStored only once its prefill has
// computed the blocks; a load driver with an engine model (bench/loadgen)
// holds the events until then. Events of one engine must be published in
// the order their serves returned them.
func (e *Engine) ServeDeferred(r Request) (cachedBlocks int, events []Event, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, nil, ErrClosed
	}
	cached, events := e.cache.ServeRequest(r)
	return cached, events, nil
}

// PublishEvents publishes events (from ServeDeferred) as the next batch;
// nothing for none.
func (e *Engine) PublishEvents(events []Event) error {
	if len(events) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return e.publishLocked(events)
}
