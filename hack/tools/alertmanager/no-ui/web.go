// Package ui stands in for Alertmanager's web interface when it is built from its Go
// module: the module does not ship the interface's built assets, which its ui package
// embeds. The tests use Alertmanager's v2 API only, so nothing is served here.
package ui

import "github.com/prometheus/common/route"

// Register serves no web interface.
func Register(_ *route.Router) {}
