# Invalid: choice with transitions.
machine "m" {
  initial = state.a
  event "go" {}
  event "back" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer"] }
  duration "wait" {}
  state "a" {
    transition "go" { to = state.b }
    choice {
      when "ok" {
        to      = state.b
        actions = [action.act]
      }
      otherwise { to = state.b }
    }
  }
  state "b" {
    timeout "back" { after = duration.wait }
    transition "back" { to = state.c }
  }
  state "c" { final = true }
}
