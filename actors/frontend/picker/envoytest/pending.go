package envoytest

import extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

// Reply is one response of a stream, or the error that ended it.
type Reply struct {
	Response *extprocv3.ProcessingResponse
	Err      error
}

// Next receives the stream's next response in the background: for
// streams the picker holds open while their requests wait (flow
// control), so a test can watch several and see which one moves. Do not
// call the stream's other receiving methods until the Reply arrived.
func (s *Stream) Next() <-chan Reply {
	out := make(chan Reply, 1)
	go func() {
		r, err := s.c.Recv()
		out <- Reply{r, err}
	}()
	return out
}
