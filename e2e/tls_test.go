package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// selfSigned writes a certificate for 127.0.0.1 and localhost and its key as PEM files and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "zidane-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLS: with --tls-cert/--tls-key the binary serves https:// and wss:// itself: a WebSocket
// over TLS shakes hands, plain HTTP on the port is not answered as HTTP, and a lone --tls-cert is
// refused at start.
func TestTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--tls-cert", certFile, "--tls-key", keyFile}, tlsCA: pool})
	tok := s.mintToken("tls", "chat")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "wss://"+s.addr+"/", &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}},
	})
	require.NoError(t, err)
	defer ws.CloseNow()
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"ipc.hello","params":{"protocolVersion":16}}`)))
	_, b, err := ws.Read(ctx)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"signalEpoch"`)

	r, err := http.Get("http://" + s.addr + "/healthz")
	if err == nil {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		assert.NotEqual(t, "ok", string(body), "plain HTTP is not served on a TLS port")
	}

	out, err := exec.Command(serverBin, "start", "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--tls-cert", certFile).CombinedOutput()
	assert.Error(t, err, "a lone --tls-cert is refused")
	assert.Contains(t, string(out), "--tls-cert and --tls-key go together")
}
