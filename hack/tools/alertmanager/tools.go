//go:build tools

// Package tools pins Alertmanager for the gate tests: its server, run on loopback, whose
// v2 API the alert gate reads.
package tools

import _ "github.com/prometheus/alertmanager/cmd/alertmanager"
