//! Bad GEMM input is a typed error naming the argument and the rule (no GPU needed).
use mkernel::gemm::GemmShape;
use mkernel::Error;

fn arg_of(e: Error) -> (&'static str, String) {
    match e {
        Error::InvalidArgument { arg, rule } => (arg, rule),
        other => panic!("expected InvalidArgument, got {other}"),
    }
}

#[test]
fn shape_rules() {
    let s = |m, n, k| GemmShape { m, n, k };
    let big = usize::MAX / 4;
    assert!(s(1000, 1544, 4104).validate(big, big, big).is_ok());
    assert_eq!(arg_of(s(0, 8, 8).validate(big, big, big).unwrap_err()).0, "m");
    let (arg, rule) = arg_of(s(8, 8, 12).validate(big, big, big).unwrap_err());
    assert_eq!(arg, "k");
    assert!(rule.contains("multiple of 8"), "{rule}");
    assert_eq!(arg_of(s(8, 12, 8).validate(big, big, big).unwrap_err()).0, "n");
    assert_eq!(arg_of(s(8, 8, 8).validate(63, 64, 64).unwrap_err()).0, "a");
    assert_eq!(arg_of(s(8, 8, 8).validate(64, 63, 64).unwrap_err()).0, "b");
    let (arg, rule) = arg_of(s(8, 8, 8).validate(64, 64, 10).unwrap_err());
    assert_eq!(arg, "c");
    assert!(rule.contains("needs 64"), "{rule}");
    assert_eq!(arg_of(s(1 << 31, 8, 8).validate(big, big, big).unwrap_err()).0, "m");
}

#[test]
fn error_messages_name_argument_and_rule() {
    let e = GemmShape { m: 4, n: 8, k: 10 }.validate(1 << 20, 1 << 20, 1 << 20).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("invalid argument `k`:"), "{text}");
}
