# Invalid: choice without otherwise.
machine "m" {
  initial = state.a
  event "go" {}
  event "back" {}
  guard "ok" {}
  action "act" { cri = ["StartContainer"] }
  duration "wait" {}
  state "a" {
    choice {
      when "ok" {
        to      = state.b
        actions = [action.act]
      }
    }
  }
  state "b" {
    timeout "back" { after = duration.wait }
    transition "back" { to = state.c }
    transition "go" { to = state.c }
  }
  state "c" { final = true }
}
