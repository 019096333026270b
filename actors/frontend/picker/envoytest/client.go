package envoytest

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Envoy is the data plane's side of ext_proc: the generated client over a
// real gRPC connection, one stream per HTTP request.
type Envoy struct {
	tb   testing.TB
	Conn *grpc.ClientConn
}

// Dial connects to a plaintext (h2c) picker at addr until the test ends.
func Dial(tb testing.TB, addr string) *Envoy {
	tb.Helper()
	return DialWith(tb, addr, insecure.NewCredentials())
}

// GatewayTLS is how the gateways implementing InferencePool dial a
// picker: TLS, ALPN h2, the certificate not verified (Envoy AI Gateway's
// empty validation context, agentgateway's INSECURE_ALL, Istio's
// DestinationRule insecureSkipVerify).
func GatewayTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}
}

// DialTLS connects to a TLS picker at addr as the gateways do.
func DialTLS(tb testing.TB, addr string) *Envoy {
	tb.Helper()
	return DialWith(tb, addr, credentials.NewTLS(GatewayTLS()))
}

// DialWith connects to a picker at addr with creds until the test ends.
func DialWith(tb testing.TB, addr string, creds credentials.TransportCredentials) *Envoy {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return &Envoy{tb: tb, Conn: conn}
}

// Stream is one HTTP request's ext_proc stream.
type Stream struct {
	tb testing.TB
	c  extprocv3.ExternalProcessor_ProcessClient
	// Cancel resets the stream, as Envoy does when the client goes away.
	Cancel context.CancelFunc
}

// Open starts the ext_proc stream of a new HTTP request.
func (e *Envoy) Open() *Stream {
	e.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := extprocv3.NewExternalProcessorClient(e.Conn).Process(ctx)
	if err != nil {
		cancel()
		e.tb.Fatal(err)
	}
	return &Stream{tb: e.tb, c: c, Cancel: cancel}
}

// Send sends messages without waiting for answers (what Envoy does in
// FULL_DUPLEX_STREAMED mode; in the other modes send one and Expect its
// answer).
func (s *Stream) Send(msgs ...*extprocv3.ProcessingRequest) {
	s.tb.Helper()
	for _, m := range msgs {
		if err := s.c.Send(m); err != nil {
			s.tb.Fatalf("send: %v", err)
		}
	}
}

// Expect receives len(want) responses and checks them (Describe's form).
func (s *Stream) Expect(want ...string) []*extprocv3.ProcessingResponse {
	s.tb.Helper()
	var got []string
	var rs []*extprocv3.ProcessingResponse
	for range want {
		r, err := s.c.Recv()
		if err != nil {
			s.tb.Fatalf("recv after %q: %v (want %q)", got, err, want)
		}
		got = append(got, Describe(r))
		rs = append(rs, r)
	}
	if !slices.Equal(got, want) {
		s.tb.Fatalf("got\n\t%q\nwant\n\t%q", got, want)
	}
	return rs
}

// Recv receives one response.
func (s *Stream) Recv() *extprocv3.ProcessingResponse {
	s.tb.Helper()
	r, err := s.c.Recv()
	if err != nil {
		s.tb.Fatalf("recv: %v", err)
	}
	return r
}

// Closed checks the picker ended the stream (after an immediate response).
func (s *Stream) Closed() {
	s.tb.Helper()
	if r, err := s.c.Recv(); err == nil {
		s.tb.Fatalf("stream still open: got %s", Describe(r))
	}
	s.Cancel()
}

// Finish is Envoy closing the stream after the response completed.
func (s *Stream) Finish() {
	s.tb.Helper()
	if err := s.c.CloseSend(); err != nil {
		s.tb.Fatal(err)
	}
	s.Closed()
}
