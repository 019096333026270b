package service

import "github.com/kvrouter/kvrouter/messages/api"

// ReasonDraining is /readyz's reason once the host is stopping.
const ReasonDraining = "draining"

var errDraining = api.Errorf(api.ErrUnavailable, ReasonDraining, "draining: the router is stopping")

// Drain takes the host out of load balancers' rotation for good: Ready
// answers ErrUnavailable (reason draining) from now on, while every
// endpoint still serves — kvrouter serve calls it at SIGTERM and stops
// after its drain timeout.
func (s *Service) Drain() { s.draining.Store(true) }
