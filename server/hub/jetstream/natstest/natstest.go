// Package natstest runs a NATS server with JetStream inside a test process (the real
// nats-server, github.com/nats-io/nats-server/v2, embedded: no package to install), on a free
// loopback port with a temporary store, for the tests of the JetStream hub (issue 25).
package natstest

import (
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Server is a running embedded NATS server.
type Server struct {
	tb   testing.TB
	opts natsserver.Options
	srv  *natsserver.Server
	// URL is nats://127.0.0.1:<port>, the same across Restart.
	URL string
}

// Start runs nats-server -js on a free port with a store under tb.TempDir(); it stops at cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{tb: tb, opts: natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: tb.TempDir(),
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20}}
	s.URL = s.start().ClientURL()
	tb.Cleanup(s.Stop)
	return s
}

func (s *Server) start() *natsserver.Server {
	s.tb.Helper()
	opts := s.opts
	srv, err := natsserver.NewServer(&opts)
	if err != nil {
		s.tb.Fatalf("nats-server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		s.tb.Fatal("nats-server not ready within 20 s")
	}
	s.srv = srv
	return srv
}

// Stop shuts the server down (its store stays for Restart); stopping twice is a no-op.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server and starts it again on the same port and store, as a NATS restart
// would.
func (s *Server) Restart() {
	s.Stop()
	s.start()
}

// Clients is how many client connections the server holds now.
func (s *Server) Clients() int {
	if s.srv == nil {
		return 0
	}
	return s.srv.NumClients()
}
