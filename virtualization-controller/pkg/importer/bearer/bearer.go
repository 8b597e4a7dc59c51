// Package bearer guards an importer's HTTP endpoint (an uploader, an exporter): the method it
// takes and the one token, in the header "Authorization: Bearer <token>".
package bearer

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
)

// Guard is what an endpoint takes.
type Guard struct {
	// Methods are the HTTP methods it answers; Hint says how to call it, for a 405.
	Methods []string
	Hint    string
	Token   string
	// What names the token in answers, e.g. "image's upload token".
	What string
	Log  *slog.Logger
}

// Refused answers r and is true when r may not go on: 405 for another method (with Allow), 401
// without an Authorization header (with WWW-Authenticate), 403 with another token (compared in
// constant time).
func (g Guard) Refused(w http.ResponseWriter, r *http.Request) bool {
	allowed := false
	for _, m := range g.Methods {
		allowed = allowed || r.Method == m
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !allowed:
		w.Header().Set("Allow", strings.Join(g.Methods, ", "))
		http.Error(w, g.Hint, http.StatusMethodNotAllowed)
	case r.Header.Get("Authorization") == "":
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "no token: send the header \"Authorization: Bearer <the "+g.What+">\"", http.StatusUnauthorized)
	case !ok || subtle.ConstantTimeCompare([]byte(got), []byte(g.Token)) != 1:
		g.Log.Info("refused: wrong token", "remote", r.RemoteAddr, "path", r.URL.Path)
		http.Error(w, "the token is not this "+g.What, http.StatusForbidden)
	default:
		return false
	}
	return true
}
