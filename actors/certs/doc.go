// Package certs is the one TLS mechanism of every kvrouter listener and of
// the traffic between router hosts: certificates from a directory reloaded
// when the files change, a self-signed certificate made in memory when
// there is no directory, optional client-certificate verification (mTLS)
// against a CA, and the version and cipher policy.
//
// # What it does
//
//   - Load reads a directory as a Kubernetes TLS Secret mounts it: tls.crt
//     (the certificate chain, leaf first) and tls.key, plus ca.crt when a
//     CA is asked for. It checks the pair before it is used: the key
//     matches the leaf, the leaf parses, is valid now and carries the
//     extended key usage the role needs (a certificate with no extended
//     key usage is valid for any, as in Go's verifier). A Bundle is the
//     result: a plain value.
//   - SelfSigned makes an ECDSA P-256 certificate with ServerAuth for the
//     names given (DNS names and IP addresses as SANs), valid for ten
//     years, kept in memory only: what the Gateway API Inference
//     Extension's gateways expect of an endpoint picker (they dial TLS and
//     do not verify the certificate).
//   - Source holds the current Bundle behind an atomic pointer. Check reads
//     the directory and swaps in a new, valid Bundle when the files
//     changed (a digest of their bytes, so Kubernetes' symlink swap and an
//     in-place rewrite both count); a broken pair is logged and counted
//     once per content, and the old Bundle stays. Watch runs Check on an
//     interval. New handshakes take the current Bundle
//     (GetConfigForClient, GetClientCertificate); a connection already
//     open keeps the certificate it was made with, so open streams are not
//     cut.
//   - ServerConfig and ClientConfig build the tls.Config of a listener or
//     a dialer over a Source: TLS 1.2 at least (Options.MinVersion), an
//     optional TLS 1.2 cipher list (TLS 1.3's suites are not
//     configurable in Go), ALPN protocols, and with a CA the peer must
//     present a certificate from it.
//
// # Why polling, and why not fsnotify
//
// A Secret volume is updated by an atomic swap of a ..data symlink, which
// file watches see as events on other paths (and miss, on some
// filesystems); the reference pickers that watch with fsnotify re-add
// their watches after every swap. Reading two small files every few
// seconds is cheap, sees every kind of update, and adds no dependency.
// Between the two file reads a half-written update can pair an old
// certificate with a new key: that read is refused (counted) and the next
// one, once both files are written, succeeds.
//
// # Why ECDSA P-256 for the self-signed certificate
//
// The reference pickers make an RSA-4096 key, which takes seconds of CPU
// at every start; P-256 is made in a millisecond, and every TLS 1.2 and
// 1.3 client the gateways use (Envoy's BoringSSL, Go, Rust's rustls)
// accepts it.
package certs
