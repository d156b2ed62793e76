package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPairingOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	st, hs := e.st, e.hs
	e.srv.pairs.unit = time.Millisecond

	post := func(body string, hdr ...string) (int, map[string]string, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/zidane/pair", bytes.NewBufferString(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]string
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out, resp.Header
	}
	ctx := context.Background()
	code, _, err := st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)

	status, out, _ := post(`{"code":"` + code + `","name":"phone"}`)
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, "chat", out["scope"])
	tok, err := st.LookupToken(ctx, out["token"])
	require.NoError(t, err)
	assert.Equal(t, "phone", tok.Name)

	status, out, _ = post(`{"code":"` + code + `","name":"again"}`)
	assert.Equal(t, http.StatusUnauthorized, status, "a code works once")
	assert.Contains(t, out["error"], "Unknown, used or expired pairing code")

	exp, _, err := st.CreatePairingCode(ctx, "admin", time.Second, 0)
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)
	status, _, _ = post(`{"code":"` + exp + `","name":"late"}`)
	assert.Equal(t, http.StatusUnauthorized, status, "an expired code is refused")

	status, _, _ = post(`not json`)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _, _ = post(`{"code":"` + code + `"}`)
	assert.Equal(t, http.StatusBadRequest, status, "name is required")
	status, out, _ = post(`{"code":"` + strings.Repeat("A", 8<<10) + `","name":"n"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, "a body over the limit is 413, not a wrong member (break-it)")
	assert.Contains(t, out["error"], "over 4 KiB")
	status, _, _ = post(`{"code":"X","name":"n"}`, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, status)
	resp, err := http.Get(hs.URL + "/zidane/pair")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// Brute force: wrong codes are slowed, then refused with 429, even for a valid code.
	good, _, err := st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)
	var last int
	for i := 0; i < pairBlockAfter+1; i++ {
		last, _, _ = post(`{"code":"ZZZZ-ZZZZ","name":"guess"}`)
	}
	assert.Equal(t, http.StatusTooManyRequests, last)
	status, _, hdr := post(`{"code":"` + good + `","name":"late2"}`)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.NotEmpty(t, hdr.Get("Retry-After"))
}

func TestPairLimiterSlowsThenBlocks(t *testing.T) {
	l := newPairLimiter()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	var delays []time.Duration
	for i := 0; i < pairBlockAfter; i++ {
		delays = append(delays, l.fail("1.2.3.4"))
	}
	assert.Equal(t, []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}, delays)
	assert.Equal(t, pairBlockFor, l.check("1.2.3.4"))
	assert.Zero(t, l.check("5.6.7.8"), "other addresses are not affected")
	now = now.Add(pairBlockFor + time.Second)
	assert.Zero(t, l.check("1.2.3.4"))
}

// TestPairLimiterCountsParallelAttempts: guesses in flight count before their answers, so a burst
// of parallel requests cannot check more than pairBlockAfter codes (adversarial review).
func TestPairLimiterCountsParallelAttempts(t *testing.T) {
	l := newPairLimiter()
	ok := 0
	for i := 0; i < 3*pairBlockAfter; i++ {
		if _, allowed := l.begin("9.9.9.9"); allowed {
			ok++
		}
	}
	assert.Equal(t, pairBlockAfter, ok)
	for i := 0; i < ok; i++ {
		l.fail("9.9.9.9")
	}
	_, allowed := l.begin("9.9.9.9")
	assert.False(t, allowed)
	_, allowed = l.begin("8.8.8.8")
	assert.True(t, allowed, "other addresses are not affected")
	l.done("8.8.8.8", true)
}

func TestPairingParallelBruteForce(t *testing.T) {
	e := newEnv(t, nil)
	hs := e.hs
	e.srv.pairs.unit = time.Millisecond
	var wg sync.WaitGroup
	var checked, refused atomic.Int64
	start := make(chan struct{})
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Post(hs.URL+"/zidane/pair", "application/json", bytes.NewBufferString(`{"code":"ZZZZ-ZZZZ","name":"guess"}`))
			if err != nil {
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				checked.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.LessOrEqual(t, checked.Load(), int64(pairBlockAfter))
	assert.Equal(t, int64(60), checked.Load()+refused.Load())
}

func TestDecodePairRequestIsStrict(t *testing.T) {
	for body, want := range map[string]string{
		`{"code":"A","name":"n"}`:            "",
		`{"code":"A","name":"n","name":"x"}`: `duplicate member "name"`,
		`{"Code":"A","name":"n"}`:            `unknown member "Code"`,
		`{"code":1,"name":"n"}`:              `member "code" must be a string`,
		`{"code":"A","name":"n"} {}`:         "data after the object",
		`["code"]`:                           "not an object",
	} {
		_, err := decodePairRequest(bytes.NewBufferString(body))
		if want == "" {
			assert.NoError(t, err, body)
		} else {
			assert.ErrorContains(t, err, want, body)
		}
	}
}

// TestFieldCase_B30_PairingRaceIsNotAWrongGuess: 20 parallel redemptions of one valid code give
// exactly one token, and the losers are not counted as wrong guesses: the address can still pair
// with the next code (before the fix they locked it out for 15 minutes).
func TestFieldCase_B30_PairingRaceIsNotAWrongGuess(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := 0; round < 3; round++ {
		code, _, err := e.st.CreatePairingCode(ctx, "chat", time.Minute, 0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var won, lost, refused atomic.Int64
		start := make(chan struct{})
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				body := fmt.Sprintf(`{"code":%q,"name":"racer-%d-%d"}`, code, round, i)
				resp, err := http.Post(e.hs.URL+"/zidane/pair", "application/json", bytes.NewBufferString(body))
				if !assert.NoError(t, err) {
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					won.Add(1)
				case http.StatusUnauthorized:
					lost.Add(1)
				case http.StatusTooManyRequests: // more than pairBlockAfter in flight at once
					refused.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.Equal(t, int64(1), won.Load(), "round %d: exactly one token per code", round)
		assert.Equal(t, int64(19), lost.Load()+refused.Load())
		// Losers whose answer comes after the winner's (here: one after the other, more of them
		// than the lockout threshold) were racing for a valid code, not guessing.
		for i := 0; i < pairBlockAfter; i++ {
			resp, err := http.Post(e.hs.URL+"/zidane/pair", "application/json", bytes.NewBufferString(fmt.Sprintf(`{"code":%q,"name":"late-%d-%d"}`, code, round, i)))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a spent code is refused like a wrong one")
		}
	}
	// The address is not locked out: a new valid code still pairs.
	code, _, err := e.st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)
	resp, err := http.Post(e.hs.URL+"/zidane/pair", "application/json", bytes.NewBufferString(fmt.Sprintf(`{"code":%q,"name":"after-the-race"}`, code)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "losing a race is not a wrong guess")
}

// The protocol documents carry nosniff like every other answer (break-it found them without it).
func TestProtocolDocumentsAreNosniff(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{"/protocol.json", "/openrpc.json", "/zidane/sse/openapi.json"} {
		resp, err := http.Get(e.hs.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, p)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), p)
	}
}

// pairPost posts a pairing body to the server with the given headers and returns the status.
func pairPost(t *testing.T, url, body string, hdr map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/zidane/pair", bytes.NewBufferString(body))
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// wrongPairBody is a pairing body with a code that is never issued (Z is in the alphabet, the code is
// not in the store).
const wrongPairBody = `{"code":"ZZZZ-ZZZZ","name":"guess"}`

// pairXFF is the header a proxy sets for the client address v.
func pairXFF(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }

// pairEnvBehindProxy is a server trusting the proxies of cidrs (the test server's peer is
// 127.0.0.1), with the pairing delay step shortened.
func pairEnvBehindProxy(t *testing.T, cidrs string) *testEnv {
	t.Helper()
	proxies, err := ParseTrustedProxies([]string{cidrs})
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.TrustedProxies = proxies })
	e.srv.pairs.unit = time.Millisecond
	return e
}

// guessFrom posts one wrong code more than the lockout allows, the i-th with X-Forwarded-For
// from(i), and returns the last status.
func guessFrom(t *testing.T, e *testEnv, from func(i int) string) (last int) {
	t.Helper()
	for i := 0; i < pairBlockAfter+1; i++ {
		last = pairPost(t, e.hs.URL, wrongPairBody, pairXFF(from(i)))
	}
	return last
}

// TestPairingLockoutPerClientBehindTrustedProxy: with --trusted-proxy covering the proxy's
// address (the test server's peer is 127.0.0.1, as behind a loopback proxy), wrong codes lock out
// the client X-Forwarded-For names, not every browser behind the proxy; the part of the header
// left of the proxy's own entry is the client's to forge and does not escape the lockout.
func TestPairingLockoutPerClientBehindTrustedProxy(t *testing.T) {
	e := pairEnvBehindProxy(t, "127.0.0.1/32,10.0.0.0/8")
	// The attacker forges a left part; the proxy appended the address it saw, 203.0.113.7.
	last := guessFrom(t, e, func(i int) string { return fmt.Sprintf("198.51.100.%d, 203.0.113.7", i) })
	require.Equal(t, http.StatusTooManyRequests, last)
	assert.Equal(t, http.StatusTooManyRequests, pairPost(t, e.hs.URL, wrongPairBody, pairXFF("203.0.113.7, 10.1.2.3")),
		"a trusted hop right of the client is skipped: still the attacker's address")

	good, _, err := e.st.CreatePairingCode(context.Background(), "chat", time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, pairPost(t, e.hs.URL, wrongPairBody, map[string]string{"Forwarded": `for="[2001:db8::1]:4711";proto=https`}),
		"another client (Forwarded) is not locked out")
	assert.Equal(t, http.StatusOK, pairPost(t, e.hs.URL, `{"code":"`+good+`","name":"phone"}`, pairXFF("203.0.113.8")),
		"another browser behind the same proxy pairs")
}

// TestPairingIgnoresForwardedWithoutTrustedProxy: without --trusted-proxy the headers are never
// read, so a forged X-Forwarded-For per request does not escape the lockout of the TCP peer.
func TestPairingIgnoresForwardedWithoutTrustedProxy(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.pairs.unit = time.Millisecond
	var last int
	for i := 0; i < pairBlockAfter+1; i++ {
		last = pairPost(t, e.hs.URL, `{"code":"ZZZZ-ZZZZ","name":"guess"}`, map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i), "Forwarded": fmt.Sprintf("for=198.51.101.%d", i)})
	}
	require.Equal(t, http.StatusTooManyRequests, last)
	good, _, err := e.st.CreatePairingCode(context.Background(), "chat", time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, pairPost(t, e.hs.URL, `{"code":"`+good+`","name":"phone"}`, map[string]string{"X-Forwarded-For": "203.0.113.99"}))
}

func TestParseTrustedProxies(t *testing.T) {
	p, err := ParseTrustedProxies([]string{"127.0.0.1/32, 10.0.0.0/8", "::1", "::ffff:192.168.0.0/112"})
	require.NoError(t, err)
	assert.Equal(t, "[127.0.0.1/32 10.0.0.0/8 ::1/128 192.168.0.0/16]", fmt.Sprint(p))
	_, err = ParseTrustedProxies([]string{"127.0.0.1/32,proxy.local"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `--trusted-proxy "proxy.local": give a CIDR range`)
}

// TestPairingBodyDeadline (break-it): POST /zidane/pair needs no token, so a client that sends
// the headers and then withholds the rest of its body must not hold the connection: past the
// body deadline it gets 408 saying so and the connection is closed.
func TestPairingBodyDeadline(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.pairs.bodyTimeout = 200 * time.Millisecond
	resp := withheldBody(t, e.hs.URL, "/zidane/pair", "")
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	var out map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	assert.Contains(t, out["error"], "did not arrive within 200ms")
	assert.True(t, resp.Close, "the connection is not kept for another request")

	// A body that arrives in time is served as before.
	code, _, err := e.st.CreatePairingCode(context.Background(), "chat", time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, pairPost(t, e.hs.URL, `{"code":"`+code+`","name":"in-time"}`, nil))
}

// TestPairingLockoutPerIPv6Prefix (break-it): wrong codes from IPv6 addresses count against
// their /64, so a client that changes its address within its prefix for each guess is still
// slowed and refused; another /64, and an IPv4 client, are not.
func TestPairingLockoutPerIPv6Prefix(t *testing.T) {
	e := pairEnvBehindProxy(t, "127.0.0.1/32")
	last := guessFrom(t, e, func(i int) string { return fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1) })
	require.Equal(t, http.StatusTooManyRequests, last, "every address of 2001:db8:1:2::/64 shares one count")
	good, _, err := e.st.CreatePairingCode(context.Background(), "chat", time.Minute, 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, pairPost(t, e.hs.URL, `{"code":"`+good+`","name":"phone"}`, pairXFF("2001:db8:1:2:ffff::1")))
	assert.Equal(t, http.StatusUnauthorized, pairPost(t, e.hs.URL, wrongPairBody, pairXFF("2001:db8:1:3::1")), "the next /64 is another client")
	assert.Equal(t, http.StatusOK, pairPost(t, e.hs.URL, `{"code":"`+good+`","name":"phone"}`, pairXFF("::ffff:203.0.113.8")), "an IPv4 client pairs")
	assert.Equal(t, "203.0.113.8", pairKey("::ffff:203.0.113.8"))
	assert.Equal(t, "2001:db8:1:2::/64", pairKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd"))
	assert.Equal(t, "not-an-ip", pairKey("not-an-ip"))
}

// withheldBody POSTs to path with a JSON body of announced length 400 of which it sends one
// byte, and returns the server's answer (read within 5 s: a server that waits for the body
// fails the test). token, when not empty, goes in Authorization.
func withheldBody(t *testing.T, url, path, token string) *http.Response {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	nc, err := net.Dial("tcp", host)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	_, err = fmt.Fprintf(nc, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{", path, host, auth)
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	require.NoError(t, err, "the server answers a withheld body instead of waiting for it")
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
