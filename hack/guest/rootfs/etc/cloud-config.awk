# Turns the runcmd list of a #cloud-config document into a shell script, one command per line, the
# way cloud-init does: a string item is a shell command, a list item is an argv (quoted here so the
# shell passes it through unchanged). Only the YAML that user-data really uses is understood: a block
# sequence (`- cmd`, `- [a, b]`, `- |` literal blocks) or a flow sequence (`runcmd: [a, "b c"]`).

function trim(s) {
	sub(/^[ \t]+/, "", s)
	sub(/[ \t\r]+$/, "", s)
	return s
}

function unquote(s) {
	s = trim(s)
	if (s ~ /^".*"$/) {
		s = substr(s, 2, length(s) - 2)
		gsub(/\\"/, "\"", s)
		gsub(/\\\\/, "\\", s)
		return s
	}
	if (s ~ /^'.*'$/) {
		s = substr(s, 2, length(s) - 2)
		gsub(/''/, "'", s)
		return s
	}
	return s
}

function shquote(s) {
	gsub(/'/, "'\\''", s)
	return "'" s "'"
}

# Splits the body of a flow sequence (brackets removed) on its top-level commas, keeping quoted
# strings and nested sequences whole.
function splitflow(s, out, n, i, c, q, depth, cur) {
	n = 0
	q = ""
	depth = 0
	cur = ""
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (q != "") {
			cur = cur c
			if (q == "\"" && c == "\\") {
				i++
				cur = cur substr(s, i, 1)
			} else if (c == q) {
				q = ""
			}
			continue
		}
		if (c == "\"" || c == "'") {
			q = c
		} else if (c == "[") {
			depth++
		} else if (c == "]") {
			depth--
		} else if (c == "," && depth == 0) {
			out[++n] = trim(cur)
			cur = ""
			continue
		}
		cur = cur c
	}
	if (trim(cur) != "")
		out[++n] = trim(cur)
	return n
}

function emit(item, n, i, args, cmd) {
	item = trim(item)
	if (item ~ /^\[.*\]$/) {
		n = splitflow(substr(item, 2, length(item) - 2), args)
		cmd = ""
		for (i = 1; i <= n; i++)
			cmd = cmd (i > 1 ? " " : "") shquote(unquote(args[i]))
		print cmd
		return
	}
	print unquote(item)
}

function indentof(s) {
	match(s, /^[ \t]*/)
	return RLENGTH
}

function flushblock() {
	if (inblock && block != "")
		printf "%s", block
	inblock = 0
	block = ""
}

{
	line = $0
	sub(/\r$/, "", line)
}

# A literal block item (`- |`): every line indented deeper than its dash belongs to it.
inblock {
	if (line ~ /^[ \t]*$/ || indentof(line) > dashindent) {
		if (blockindent < 0 && line !~ /^[ \t]*$/)
			blockindent = indentof(line)
		block = block substr(line, blockindent + 1) "\n"
		next
	}
	flushblock()
}

inrun {
	if (line ~ /^[ \t]*(#.*)?$/)
		next
	if (line ~ /^[ \t]*-([ \t]|$)/) {
		dashindent = indentof(line)
		item = line
		sub(/^[ \t]*-[ \t]*/, "", item)
		if (item ~ /^[|>][-+]?[ \t]*$/) {
			inblock = 1
			blockindent = -1
			block = ""
		} else {
			emit(item)
		}
		next
	}
	# Anything else at the top level is the next key: the list is over.
	inrun = 0
}

/^runcmd:/ {
	rest = line
	sub(/^runcmd:[ \t]*/, "", rest)
	rest = trim(rest)
	if (rest ~ /^\[/) {
		sub(/\][ \t]*$/, "", rest)
		n = splitflow(substr(rest, 2), items)
		for (i = 1; i <= n; i++)
			emit(items[i])
	} else {
		inrun = 1
	}
}

END {
	flushblock()
}
