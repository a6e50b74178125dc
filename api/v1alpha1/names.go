/*
Copyright The netpulse Authors.

SPDX-License-Identifier: Apache-2.0
*/

package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels on every object netpulse writes; the writer's informer watches only these.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelManagedByValue = "netpulse"
	LabelSourcePod      = "netpulse.io/source-pod"
	// LabelShard names the gateway shard that writes the object, "<index>-of-<count>"
	// (only when the gateway is sharded).
	LabelShard = "netpulse.io/shard"
)

// Reasons of the Events netpulse emits about the objects it writes (and the declared
// checks it runs).
const (
	// EventOutageDetected: a pair's or a check's outage began (Warning).
	EventOutageDetected = "ConnectivityOutageDetected"
	// EventRestored: the outage ended (Normal).
	EventRestored = "ConnectivityRestored"
	// EventFlapping: a pair failed again within flap_window of recovering (Warning).
	EventFlapping = "ConnectivityFlapping"
	// EventZoneConnectivityLost and EventZoneConnectivityRestored: a zone pair was cut or
	// is whole again (on its ZoneNetworkHealth, in the default namespace).
	EventZoneConnectivityLost     = "ZoneConnectivityLost"
	EventZoneConnectivityRestored = "ZoneConnectivityRestored"
)

// maxNameLen keeps PodNetworkHealth names well inside the 253-character limit and
// readable in `kubectl get pnh`.
const maxNameLen = 120

// ObjectName is the deterministic PodNetworkHealth name of a pair:
// "<source>.<target>-<hash>", where target is the target pod's name (prefixed by its
// namespace when it differs from the source's), "node.<name>" or "ext.<address>". The hash
// of the full identity keeps names unique after sanitising and truncation; the same pair
// always maps to the same name.
//
// An external target's port and endpoint (URL, DNS question) are part of its identity:
// ExternalObjectName. ObjectName is ExternalObjectName without them (the name of an
// address-only target, unchanged from before they existed).
func ObjectName(sourceNS, sourcePod, targetKind, targetNS, targetName, targetAddr string) string {
	return ExternalObjectName(sourceNS, sourcePod, targetKind, targetNS, targetName, targetAddr, 0, "")
}

// ExternalObjectName is ObjectName with an external target's port and endpoint.
func ExternalObjectName(sourceNS, sourcePod, targetKind, targetNS, targetName, targetAddr string, port int64, endpoint string) string {
	var target string
	switch targetKind {
	case "Pod":
		target = targetName
		if targetNS != "" && targetNS != sourceNS {
			target = targetNS + "." + targetName
		}
	case "Node":
		target = "node." + targetName
	default:
		target = "ext." + targetAddr
	}
	identity := []string{sourceNS, sourcePod, targetKind, targetNS, targetName, targetAddr}
	if port != 0 || endpoint != "" {
		identity = append(identity, strconv.FormatInt(port, 10), endpoint)
	}
	sum := sha256.Sum256([]byte(strings.Join(identity, "\x00")))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	base := sanitize(sourcePod + "." + target)
	if len(base) > maxNameLen-len(suffix) {
		base = sanitize(base[:maxNameLen-len(suffix)])
	}
	return base + suffix
}

// sanitize maps s onto the DNS-subdomain alphabet: lowercase alphanumerics, '-' and '.',
// starting and ending alphanumeric.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	// Each dot-separated label must start and end alphanumeric; empty labels go.
	var labels []string
	for _, l := range strings.Split(b.String(), ".") {
		if l = strings.Trim(l, "-"); l != "" {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return "pair"
	}
	return strings.Join(labels, ".")
}

// ZoneObjectName is the ZoneNetworkHealth name of the zone pair from → to: "<from>.<to>"
// lowercased when that is a valid name, else a digest (zone label values allow characters
// names do not).
func ZoneObjectName(from, to string) string {
	n := strings.ToLower(from) + "." + strings.ToLower(to)
	if n == from+"."+to && len(validation.IsDNS1123Subdomain(n)) == 0 && !strings.Contains(from, ".") && !strings.Contains(to, ".") {
		return n
	}
	sum := sha256.Sum256([]byte(from + "\x00" + to))
	return "zones-" + hex.EncodeToString(sum[:10])
}
