//! Unit tests of `resp`.

use super::*;
use proptest::prelude::*;

fn limits() -> Limits {
    Limits {
        max_args: 8,
        max_bulk: 16,
        max_inline: 32,
        max_command: 128,
    }
}

fn all(input: &[u8], l: &Limits) -> Result<Vec<Vec<Bytes>>, RespError> {
    let mut buf = BytesMut::from(input);
    let mut cmds = Vec::new();
    while let Some(c) = parse(&mut buf, l)? {
        cmds.push(c);
    }
    Ok(cmds)
}

fn words(c: &[Bytes]) -> Vec<&[u8]> {
    c.iter().map(|b| b.as_ref()).collect()
}

#[test]
fn multibulk_and_inline_pipelined() {
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n  SET a  b\r\n*0\r\n\r\n*1\r\n$0\r\n\r\n";
    let cmds = all(input, &limits()).unwrap();
    assert_eq!(cmds.len(), 4);
    assert_eq!(words(&cmds[0]), [&b"GET"[..], b"k"]);
    assert_eq!(words(&cmds[1]), [&b"PING"[..]]);
    assert_eq!(words(&cmds[2]), [&b"SET"[..], b"a", b"b"]);
    assert_eq!(words(&cmds[3]), [&b""[..]]);
}

#[test]
fn binary_safe_bulks() {
    let cmds = all(b"*1\r\n$4\r\na\r\n\0\r\n", &limits()).unwrap();
    assert_eq!(words(&cmds[0]), [&b"a\r\n\0"[..]]);
}

#[test]
fn incomplete_is_not_an_error_and_consumes_nothing() {
    let whole = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    for cut in 0..whole.len() {
        let mut buf = BytesMut::from(&whole[..cut]);
        assert_eq!(parse(&mut buf, &limits()), Ok(None), "cut at {cut}");
        assert_eq!(buf.len(), cut);
    }
}

#[test]
fn announced_sizes_are_refused_before_their_bytes_arrive() {
    let l = limits();
    let cases: &[(&[u8], RespError)] = &[
            (b"*9\r\n", RespError::MultibulkLength),
            (b"*99999999999999999999\r\n", RespError::MultibulkLength),
            (b"*1\r\n$17\r\n", RespError::BulkLength),
            (b"*1\r\n$-1\r\n", RespError::BulkLength),
            (b"*1\r\n$9223372036854775807\r\n", RespError::BulkLength),
            (b"*x\r\n", RespError::MultibulkLength),
            (b"*01\r\n", RespError::MultibulkLength),
            (b"*1\r\n:1\r\n", RespError::ExpectedBulk(b':')),
            (b"*1\r\n$1\r\nab\r\n", RespError::MissingCrlf),
            (b"*1\r\x00", RespError::MultibulkLength),
            (
                b"*8\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n",
                RespError::TooLarge { max: 128 },
            ),
        ];
    for (input, want) in cases {
        let mut buf = BytesMut::from(*input);
        assert_eq!(
            parse(&mut buf, &l).as_ref(),
            Err(want),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Header and inline lines without an end, past the line limit.
    let long = [b'1'; 40];
    let mut star = b"*".to_vec();
    star.extend_from_slice(&long);
    assert_eq!(check(&star, &l), Err(RespError::CountLineTooLong));
    let mut dollar = b"*1\r\n$".to_vec();
    dollar.extend_from_slice(&long);
    assert_eq!(check(&dollar, &l), Err(RespError::BulkLineTooLong));
    assert_eq!(check(&[b'a'; 40], &l), Err(RespError::InlineTooLong));
    let mut line = vec![b'a'; 40];
    line.push(b'\n');
    assert_eq!(check(&line, &l), Err(RespError::InlineTooLong));
    // Too many inline words.
    assert_eq!(
        check(b"a b c d e f g h i\n", &l),
        Err(RespError::MultibulkLength)
    );
}

#[test]
fn errors_read_as_redis_words_them() {
    assert_eq!(
        RespError::ExpectedBulk(b':').to_string(),
        "expected '$', got ':'"
    );
    assert_eq!(RespError::BulkLength.to_string(), "invalid bulk length");
}

#[test]
fn integers_as_redis_reads_them() {
    assert_eq!(parse_int(b"0"), Some(0));
    assert_eq!(parse_int(b"-1"), Some(-1));
    assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"+1",
        b"01",
        b"-0",
        b" 1",
        b"1 ",
        b"9223372036854775808",
    ] {
        assert_eq!(parse_int(bad), None, "{bad:?}");
    }
}

#[test]
fn writers() {
    let mut out = BytesMut::new();
    write::simple(&mut out, "OK");
    write::error(&mut out, "ERR a\r\nb");
    write::integer(&mut out, -42);
    write::integer(&mut out, i64::MIN);
    write::bulk(&mut out, b"hi");
    write::null(&mut out, false);
    write::null(&mut out, true);
    write::map(&mut out, 2, false);
    write::map(&mut out, 2, true);
    assert_eq!(
            &out[..],
            &b"+OK\r\n-ERR a  b\r\n:-42\r\n:-9223372036854775808\r\n$2\r\nhi\r\n$-1\r\n_\r\n*4\r\n%2\r\n"[..]
        );
}

#[test]
fn peeking_takes_nothing_and_stops_where_parsing_would_wait() {
    let l = limits();
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINCR\r\n$0\r\n\r\n*2\r\n$3\r\nGET\r\n$2\r\nab";
    let peeked: Vec<(&[u8], Option<&[u8]>)> = peek_commands(input, &l).collect();
    assert_eq!(
        peeked,
        vec![
            (&b"GET"[..], Some(&b"k"[..])),
            (&b"PING"[..], None),
            (&b"INCR"[..], Some(&b""[..])),
        ]
    );
    // An inline command, or bytes that are no RESP, end the look.
    assert_eq!(peek_commands(b"GET k\r\n", &l).count(), 0);
    let bad = b"*1\r\n$4\r\nPING\r\n*1\r\n+PING\r\n*1\r\n$4\r\nPING\r\n";
    assert_eq!(peek_commands(bad, &l).count(), 1);
    // Over a limit: not looked at (parse refuses it).
    let big = b"*2\r\n$3\r\nGET\r\n$17\r\naaaaaaaaaaaaaaaaa\r\n";
    assert_eq!(peek_commands(big, &l).count(), 0);
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = BytesMut::new();
    write::array(&mut out, args.len());
    for a in args {
        write::bulk(&mut out, a);
    }
    out.to_vec()
}

proptest! {
    /// Any pipeline of commands, in any split into reads, parses back
    /// to the same commands.
    #[test]
    fn pipelines_round_trip(
        cmds in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 1..8), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let l = Limits { max_command: 4096, ..limits() };
        let wire: Vec<u8> = cmds.iter().flat_map(|c| encode(c)).collect();
        let cut = cut.index(wire.len() + 1);
        let mut buf = BytesMut::from(&wire[..cut]);
        let mut got = Vec::new();
        while let Some(c) = parse(&mut buf, &l).unwrap() {
            got.push(c);
        }
        buf.extend_from_slice(&wire[cut..]);
        while let Some(c) = parse(&mut buf, &l).unwrap() {
            got.push(c);
        }
        prop_assert!(buf.is_empty());
        let got: Vec<Vec<Vec<u8>>> = got.iter().map(|c| c.iter().map(|a| a.to_vec()).collect()).collect();
        prop_assert_eq!(got, cmds);
    }

    /// What a look ahead sees is what parsing then takes: the same
    /// commands' first two arguments, in order, up to where it stops.
    #[test]
    fn peeking_agrees_with_parsing(
        cmds in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 1..8), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let l = Limits { max_command: 4096, ..limits() };
        let wire: Vec<u8> = cmds.iter().flat_map(|c| encode(c)).collect();
        let wire = &wire[..cut.index(wire.len() + 1)];
        let peeked: Vec<(Vec<u8>, Option<Vec<u8>>)> = peek_commands(wire, &l)
            .map(|(n, a)| (n.to_vec(), a.map(<[u8]>::to_vec)))
            .collect();
        let mut buf = BytesMut::from(wire);
        let mut parsed = Vec::new();
        while let Some(c) = parse(&mut buf, &l).unwrap() {
            parsed.push((c[0].to_vec(), c.get(1).map(|a| a.to_vec())));
        }
        prop_assert_eq!(peeked, parsed);
    }

    /// Arbitrary bytes never panic, and a look ahead never sees more
    /// than parsing takes.
    #[test]
    fn garbage_is_never_peeked_past_parsing(input in prop::collection::vec(any::<u8>(), 0..256)) {
        let l = limits();
        let peeked = peek_commands(&input, &l).count();
        let mut buf = BytesMut::from(&input[..]);
        let mut parsed = 0;
        while let Ok(Some(_)) = parse(&mut buf, &l) {
            parsed += 1;
        }
        prop_assert!(peeked <= parsed);
    }

    /// Arbitrary bytes never panic, and an accepted command never
    /// breaks a limit.
    #[test]
    fn garbage_is_refused_or_bounded(input in prop::collection::vec(any::<u8>(), 0..256)) {
        let l = limits();
        let mut buf = BytesMut::from(&input[..]);
        while let Ok(Some(c)) = parse(&mut buf, &l) {
            prop_assert!(c.len() <= l.max_args);
            prop_assert!(c.iter().all(|a| a.len() <= l.max_bulk.max(l.max_inline)));
        }
    }
}
