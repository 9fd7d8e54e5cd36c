# Invalid: an incomplete rank, a rank over the replicated machine, a
# duplicate invariant name, a send to the own machine, and a list mixing
# machines.
machine "p" {
  initial = state.a
  event "go" {}
  action "act" {}
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" {
    transition "go" { to = state.c }
  }
  state "c" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  state "x" {
    transition "poke" { to = state.y }
  }
  state "y" { final = true }
}
replicated "c" {}
effect "p" "act" { sends = [p.go] }
invariant "partial" { rank = [[p.a], [p.b]] }
invariant "containers" { rank = [[c.x], [c.y]] }
invariant "partial" {
  never_enter = [c.y, p.b]
}
