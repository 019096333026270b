package admission

// The edge's pure core: whether a request whose headers have arrived is
// taken, from facts that cost nothing to read — the requests in flight on
// its endpoint and on the host, the bytes their declared bodies take, and
// the route path's overload state. No body is read before the answer, so a
// refusal costs a header parse and a small write, not a decode.

// Reason is why the edge refused a request (ReasonNone: it took it).
type Reason uint8

// The edge's reasons, in the order Admit checks them.
const (
	ReasonNone             Reason = iota // admitted
	ReasonBodyTooLarge                   // Content-Length over the endpoint's body cap (413, as the body reader would)
	ReasonOverloaded                     // the route path's own gate is full (Limits.Overloaded)
	ReasonHostInFlight                   // Limits.MaxInFlight requests in flight on the host's edge
	ReasonEndpointInFlight               // the endpoint's own cap of requests in flight
	ReasonBytesInFlight                  // the declared bodies in flight would pass Limits.MaxBytesInFlight
	reasonCount
)

var reasonNames = [reasonCount]string{"", "body_too_large", "overloaded", "host_in_flight", "endpoint_in_flight", "bytes_in_flight"}

// String is the reason's metric label.
func (r Reason) String() string {
	if r >= reasonCount {
		return "unknown"
	}
	return reasonNames[r]
}

// Ask is one request at the edge, as its headers tell it.
type Ask struct {
	// Endpoint is the index EdgeState.Endpoint gave.
	Endpoint int
	// ContentLength is the declared body size, -1 when unknown (a chunked
	// body): that one is charged its endpoint's whole BodyCap, the most
	// its body reader lets it take.
	ContentLength int64
	// Overloaded is the route path's overload state when the request
	// arrived (the shell reads it: Gate.Full).
	Overloaded bool
}

// endpointState is one endpoint's cap and count.
type endpointState struct {
	name     string
	bodyCap  int64 // its body reader answers 413 past it: a larger Content-Length is refused at once
	max      int   // its own cap of requests in flight (0: only the host's)
	inFlight int
}

// EdgeLimits configure an EdgeState. Zero caps are off.
type EdgeLimits struct {
	// MaxInFlight caps the requests in flight on every endpoint together.
	MaxInFlight int
	// MaxBytesInFlight caps the declared (or charged) body bytes in flight.
	MaxBytesInFlight int64
	// EndpointMaxInFlight caps one endpoint's requests, by name.
	EndpointMaxInFlight map[string]int
}

// Ticket is an admitted request's share of the edge, given back by Done.
type Ticket struct {
	Endpoint int
	Bytes    int64
}

// EdgeState is the edge's counters. Plain data, not safe for concurrent
// use (the Edge shell holds a lock around it).
type EdgeState struct {
	limits    EdgeLimits
	inFlight  int
	bytes     int64
	endpoints []endpointState
}

// NewEdgeState returns the counters of an edge under limits.
func NewEdgeState(limits EdgeLimits) *EdgeState { return &EdgeState{limits: limits} }

// Endpoint is the index of the endpoint name whose body cap is bodyCap
// (0: none), added at its first use. The names are the front ends' own
// bounded set (a route pattern, "proxy"), never a request's path.
func (s *EdgeState) Endpoint(name string, bodyCap int64) int {
	for i := range s.endpoints {
		if s.endpoints[i].name == name {
			s.endpoints[i].bodyCap = bodyCap
			return i
		}
	}
	s.endpoints = append(s.endpoints, endpointState{name: name, bodyCap: bodyCap, max: s.limits.EndpointMaxInFlight[name]})
	return len(s.endpoints) - 1
}

// Name is endpoint i's name.
func (s *EdgeState) Name(i int) string { return s.endpoints[i].name }

// Endpoints is the number of endpoints seen.
func (s *EdgeState) Endpoints() int { return len(s.endpoints) }

// Admit takes a (a Ticket for Done) or refuses it (a Reason). It never
// refuses a request an idle edge would take: with nothing in flight only
// an over-cap Content-Length is refused, which the body reader would
// answer 413 anyway.
func (s *EdgeState) Admit(a Ask) (Ticket, Reason) {
	ep := &s.endpoints[a.Endpoint]
	if ep.bodyCap > 0 && a.ContentLength > ep.bodyCap {
		return Ticket{}, ReasonBodyTooLarge
	}
	charge := a.ContentLength
	if charge < 0 {
		charge = ep.bodyCap
	}
	if s.inFlight > 0 {
		switch {
		case a.Overloaded:
			return Ticket{}, ReasonOverloaded
		case Over(int64(s.inFlight), int64(s.limits.MaxInFlight)):
			return Ticket{}, ReasonHostInFlight
		case Over(int64(ep.inFlight), int64(ep.max)):
			return Ticket{}, ReasonEndpointInFlight
		case s.limits.MaxBytesInFlight > 0 && s.bytes+charge > s.limits.MaxBytesInFlight:
			return Ticket{}, ReasonBytesInFlight
		}
	}
	s.inFlight++
	ep.inFlight++
	s.bytes += charge
	return Ticket{Endpoint: a.Endpoint, Bytes: charge}, ReasonNone
}

// Done gives an admitted request's share back.
func (s *EdgeState) Done(t Ticket) {
	s.inFlight--
	s.endpoints[t.Endpoint].inFlight--
	s.bytes -= t.Bytes
}

// InFlight is the requests admitted and not done, and their bytes.
func (s *EdgeState) InFlight() (requests int, bytes int64) { return s.inFlight, s.bytes }
