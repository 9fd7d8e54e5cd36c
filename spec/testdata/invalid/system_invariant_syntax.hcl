# Invalid: invariants with no kind, two kinds, an incomplete rank, after
# without reaches, a misplaced while, and a duplicate name.
machine "p" {
  initial = state.a
  event "go" {}
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" {
    transition "go" { to = state.c }
  }
  state "c" { final = true }
}
invariant "none" { doc = "nothing to check" }
invariant "two" {
  always_reaches = [p.c]
  never_enter    = [p.b]
}
invariant "partial" { rank = [[p.a], [p.b]] }
invariant "after" { after = p.go }
invariant "misplaced" {
  always_reaches = [p.c]
  while          = [p.a]
}
invariant "partial" { always_reaches = [p.c] }
