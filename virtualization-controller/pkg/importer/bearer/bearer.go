// Package bearer checks the one token an importer's HTTP endpoint (an uploader, an exporter)
// takes, in the header "Authorization: Bearer <token>".
package bearer

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Check is 0 when r bears token; else the status to answer: 401 without an Authorization
// header (with WWW-Authenticate set on w), 403 with another token.
func Check(w http.ResponseWriter, r *http.Request, token string) int {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case r.Header.Get("Authorization") == "":
		w.Header().Set("WWW-Authenticate", "Bearer")
		return http.StatusUnauthorized
	case !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
		return http.StatusForbidden
	}
	return 0
}
