package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages/api"
)

// maxPeers bounds the registered peers (each is an address given by a
// client).
const maxPeers = 64

// RegisterPeer implements api.Backend (POST /register_peer, as Dynamo's
// standalone indexer): peer, an http(s)://host:port router, becomes a
// source of dumps for recovery. A router that follows no worker yet (a
// single host started cold, or emptied) recovers from it at once, in the
// background, as --bootstrap-from does at start: it loads the peer's GET
// /dump and follows the same engines from where the dump stands; the
// outcome is logged. A router that already follows workers keeps the peer
// listed for the next recovery (a peer is never merged into live state:
// the engines are the truth there). A cluster member only lists it: its
// members rebuild from the engines and from each other.
func (s *Service) RegisterPeer(_ context.Context, peer string) error {
	u, err := peerURL(peer)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.peers == nil {
		s.peers = map[string]bool{}
	}
	if !s.peers[u] && len(s.peers) >= maxPeers {
		s.mu.Unlock()
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "already %d peers registered", maxPeers)
	}
	s.peers[u] = true
	warm := len(s.workers) == 0 && s.cfg.Cluster == nil
	token, log := s.peerToken, s.peerLog
	s.mu.Unlock()
	if warm {
		go s.recoverFrom(u, token, log)
	}
	return nil
}

// recoverFrom warms the router up from peer (Bootstrap), logging the
// outcome.
func (s *Service) recoverFrom(peer, token string, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
	defer cancel()
	rep, err := s.Bootstrap(ctx, peer, token)
	if err != nil {
		log.Warn("recovery from a registered peer failed", "peer", peer, "err", err)
		return
	}
	log.Info("recovered from a registered peer", "peer", peer, "namespaces", rep.Namespaces,
		"events", rep.Events, "streams_resumed", rep.Resumed, "streams_fresh", rep.Fresh)
}

// DeregisterPeer implements api.Backend (POST /deregister_peer).
func (s *Service) DeregisterPeer(_ context.Context, peer string) error {
	u, err := peerURL(peer)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.peers[u] {
		return api.Errorf(api.ErrNotFound, api.ReasonUnknownPeer, "peer %s is not registered", u)
	}
	delete(s.peers, u)
	return nil
}

// Peers implements api.Backend (GET /peers): the registered peers, sorted.
func (s *Service) Peers(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.peers))
	for u := range s.peers {
		out = append(out, u)
	}
	slices.Sort(out)
	return out, nil
}

// addPeer lists peer without recovering from it (--bootstrap-from's peer,
// already recovered from).
func (s *Service) addPeer(peer, token string, log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers == nil {
		s.peers = map[string]bool{}
	}
	if u, err := peerURL(peer); err == nil {
		s.peers[u] = true
	}
	s.peerToken, s.peerLog = token, log
}

// peerURL checks and normalizes a peer address: http(s)://host[:port][/path]
// without a trailing slash, query or fragment.
func peerURL(peer string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(peer))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "peer %q is not an http(s)://host:port address", peer)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return fmt.Sprintf("%s://%s%s", u.Scheme, u.Host, u.Path), nil
}
