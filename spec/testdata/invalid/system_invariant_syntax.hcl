# Invalid: invariants with no kind, two kinds, an incomplete rank, after
# without reaches, a misplaced while, a duplicate name, a misplaced unless,
# a parameter without values and requires without may_report_nothing.
machine "p" {
  initial = state.a
  event "go" {}
  action "act" {}
  state "a" {
    entry = [action.act]
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
invariant "unless" {
  leaves = [p.a]
  unless = [p.flag]
}
parameter "empty" { values = [] }
effect "p" "act" { requires = [p.a] }
