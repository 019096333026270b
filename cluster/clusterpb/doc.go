// Package clusterpb holds the protobuf messages kvrouter members exchange
// (kvrouter.proto, generated kvrouter.pb.go — regenerate with `make
// generate`) and their conversions to and from the plain Go types of
// package messages and actors/indexer (convert.go).
//
// The proto is the only cross-host definition of each message; the pure
// core never sees it. Every conversion is total in the plain → proto
// direction and validating in the other: a message from another host that
// does not fit the plain type (mismatched block arrays, a kind or tier
// outside uint8, an oversized tier or reason array, a trace id of the wrong
// length) is refused with an error wrapping ErrMalformed, never truncated.
// The round-trip tests check plain → proto → wire → proto → plain is the
// identity over random values.
package clusterpb
