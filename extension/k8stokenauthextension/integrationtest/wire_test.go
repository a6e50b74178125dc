// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package integrationtest

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/netpulse/netpulse/internal/identity"
)

// rawResult is how the server ended a raw gRPC call.
type rawResult struct {
	grpcStatus string        // from the trailers ("" when none came)
	reset      bool          // the stream was reset
	resetCode  http2.ErrCode // its code
	goAway     bool          // the connection was closed with GOAWAY
	goAwayCode http2.ErrCode // its code
	headers    []hpack.HeaderField
}

// rawExport sends one OTLP Export over a hand-written HTTP/2 stream, so it can carry header
// fields that gRPC and net/http clients refuse to send.
func rawExport(t *testing.T, addr string, extra []hpack.HeaderField) rawResult {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	require.NoError(t, fr.WriteSettings())

	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"},
		{Name: ":path", Value: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"},
		{Name: ":authority", Value: addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
		{Name: "x-agent-note", Value: "hello"},
	}
	for _, f := range append(fields, extra...) {
		require.NoError(t, enc.WriteField(f))
	}
	require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hbuf.Bytes(), EndHeaders: true}))
	body, err := pmetricotlp.NewExportRequestFromMetrics(sample()).MarshalProto()
	require.NoError(t, err)
	msg := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(body)))
	copy(msg[5:], body)
	require.NoError(t, fr.WriteData(1, true, msg))

	var res rawResult
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Logf("read: %v", err)
			return res
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WritePing(true, f.Data))
			}
		case *http2.MetaHeadersFrame:
			res.headers = append(res.headers, f.Fields...)
			if v := f.PseudoValue("status"); v != "" && v != "200" {
				return res
			}
			for _, hf := range f.Fields {
				if hf.Name == "grpc-status" {
					res.grpcStatus = hf.Value
				}
			}
			if f.StreamEnded() {
				return res
			}
		case *http2.RSTStreamFrame:
			res.reset, res.resetCode = true, f.ErrCode
			return res
		case *http2.GoAwayFrame:
			res.goAway, res.goAwayCode = true, f.ErrCode
			return res
		}
	}
}

// The reserved client-metadata keys contain a "/", which no HTTP/2 header field name may
// contain: a receiver refuses a request that carries one, even a receiver WITHOUT the
// authenticator and with include_metadata (the worst configuration), so the identity in
// client metadata can only have been written by k8s_token_auth.
func TestReservedMetadataKeysCannotComeFromTheWire(t *testing.T) {
	g := startGateway(t, false, nil)

	// The control: the same hand-written request without the forged fields is accepted and
	// its ordinary header reaches the pipeline as client metadata.
	res := rawExport(t, g.addr, nil)
	require.Equal(t, "0", res.grpcStatus, "control request: %+v", res)
	got := g.sink.received()
	require.Len(t, got, 1)
	assert.Equal(t, []string{"hello"}, got[0].Metadata.Get("x-agent-note"), "include_metadata passes headers on")
	_, _, ok := identity.FromClientInfo(got[0])
	assert.False(t, ok)

	forged := []hpack.HeaderField{
		{Name: identity.MetadataNamespace, Value: "netpulse"}, {Name: identity.MetadataServiceAccount, Value: agentSA},
		{Name: identity.MetadataPodName, Value: "victim"}, {Name: identity.MetadataPodUID, Value: "uid-victim"},
		{Name: identity.MetadataNodeName, Value: "node-victim"},
	}
	res = rawExport(t, g.addr, forged)
	t.Logf("forged request: %s", describe(res))
	assert.NotEqual(t, "0", res.grpcStatus)
	assert.True(t, res.reset || res.goAway || (res.grpcStatus != "" && res.grpcStatus != "0"), "%+v", res)
	assert.Len(t, g.sink.received(), 1, "the forged request reached nothing")
	for _, info := range g.sink.received() {
		_, _, ok := identity.FromClientInfo(info)
		assert.False(t, ok)
	}
}

func describe(r rawResult) string {
	switch {
	case r.reset:
		return fmt.Sprintf("stream reset (%v)", r.resetCode)
	case r.goAway:
		return fmt.Sprintf("connection closed (GOAWAY %v)", r.goAwayCode)
	}
	return fmt.Sprintf("grpc-status %q, headers %v", r.grpcStatus, r.headers)
}
