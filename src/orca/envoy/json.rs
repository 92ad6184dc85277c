//! The `JSON` form as Envoy reads it: `MessageUtil::loadFromJsonNoThrow`,
//! protobuf's JSON parser (`json/internal/parser.cc`) in strict mode, for
//! `OrcaLoadReport` alone. Either field name (`cpu_utilization` or
//! `cpuUtilization`); an unknown field, a field set twice (but for a
//! `null`), a map key repeated, or anything after the object is an error;
//! a double is a number or a string (`"NaN"`, `"Infinity"`, `"-Infinity"`
//! or what absl's `SimpleAtod` reads); `null` leaves a field unset and
//! makes a map entry 0.

use super::{Kind, OrcaLoadReport, map_mut, simple_atod};

/// Which field of a report a JSON name is (the field number), as
/// protobuf's `FieldByName` finds it: the JSON name or the proto name.
fn field(name: &str) -> Option<u32> {
    Some(match name {
        "cpu_utilization" | "cpuUtilization" => 1,
        "mem_utilization" | "memUtilization" => 2,
        "rps" => 3,
        "request_cost" | "requestCost" => 4,
        "utilization" => 5,
        "rps_fractional" | "rpsFractional" => 6,
        "eps" => 7,
        "named_metrics" | "namedMetrics" => 8,
        "application_utilization" | "applicationUtilization" => 9,
        _ => return None,
    })
}

struct Lexer<'a> {
    input: &'a [u8],
    at: usize,
}

fn fail<T>(why: &'static str) -> Result<T, Kind> {
    Err(Kind::Json(why))
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        while matches!(self.input.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.input.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8, why: &'static str) -> Result<(), Kind> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            fail(why)
        }
    }

    fn null(&mut self) -> Result<bool, Kind> {
        if self.peek() != Some(b'n') {
            return Ok(false);
        }
        if self.input[self.at..].starts_with(b"null") {
            self.at += 4;
            Ok(true)
        } else {
            fail("unexpected character")
        }
    }

    fn hex4(&mut self) -> Result<u32, Kind> {
        let digits = self
            .input
            .get(self.at..self.at + 4)
            .ok_or(Kind::Json("bad \\u escape"))?;
        let mut value = 0;
        for &digit in digits {
            let nibble = (digit as char)
                .to_digit(16)
                .ok_or(Kind::Json("bad \\u escape"))?;
            value = value * 16 + nibble;
        }
        self.at += 4;
        Ok(value)
    }

    /// A JSON string, escapes resolved; valid UTF-8 and UTF-16 only.
    fn string(&mut self) -> Result<String, Kind> {
        self.expect(b'"', "expected a string")?;
        let mut out = Vec::new();
        loop {
            let Some(&byte) = self.input.get(self.at) else {
                return fail("unterminated string");
            };
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let Some(&escape) = self.input.get(self.at) else {
                        return fail("unterminated string");
                    };
                    self.at += 1;
                    let c = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let unit = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&unit) {
                                if !self.input[self.at..].starts_with(b"\\u") {
                                    return fail("lone surrogate");
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return fail("lone surrogate");
                                }
                                0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00)
                            } else {
                                unit
                            };
                            char::from_u32(code).ok_or(Kind::Json("lone surrogate"))?
                        }
                        _ => return fail("bad escape"),
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                0..0x20 => return fail("control character in string"),
                _ => out.push(byte),
            }
        }
        String::from_utf8(out).or(fail("invalid UTF-8"))
    }

    /// The text of a JSON number, as JSON's grammar has it.
    fn raw_number(&mut self) -> Result<&str, Kind> {
        self.skip_space();
        let start = self.at;
        let input = self.input;
        let digits = |at: &mut usize| {
            let from = *at;
            while input.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - from
        };
        if input.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match input.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                digits(&mut self.at);
            }
            _ => return fail("invalid number"),
        }
        if input.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(&mut self.at) == 0 {
                return fail("invalid number");
            }
        }
        if matches!(input.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(input.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(&mut self.at) == 0 {
                return fail("invalid number");
            }
        }
        std::str::from_utf8(&input[start..self.at]).or(fail("invalid number"))
    }

    /// A double (protobuf's `ParseFp`); `None` for `null`.
    fn double(&mut self) -> Result<Option<f64>, Kind> {
        if self.null()? {
            return Ok(None);
        }
        match self.peek() {
            Some(b'"') => {
                let text = self.string()?;
                Ok(Some(match text.as_str() {
                    "NaN" => f64::NAN,
                    "Infinity" => f64::INFINITY,
                    "-Infinity" => f64::NEG_INFINITY,
                    _ => simple_atod(text.as_bytes())
                        .ok_or(Kind::Json("non-number characters in quoted number"))?,
                }))
            }
            Some(b'-' | b'0'..=b'9') => {
                let value: f64 = self.raw_number()?.parse().or(fail("invalid number"))?;
                if value.is_finite() {
                    Ok(Some(value))
                } else {
                    fail("invalid number")
                }
            }
            _ => fail("expected number or string"),
        }
    }

    /// A uint64 (protobuf's `ParseUInt`); `None` for `null`.
    fn uint64(&mut self) -> Result<Option<u64>, Kind> {
        if self.null()? {
            return Ok(None);
        }
        let text = match self.peek() {
            Some(b'"') => {
                let text = self.string()?;
                if text.bytes().any(super::is_space) {
                    return fail("non-number characters in quoted number");
                }
                text
            }
            Some(b'-' | b'0'..=b'9') => self.raw_number()?.to_owned(),
            _ => return fail("expected number or string"),
        };
        if let Ok(value) = text.parse::<u64>() {
            return Ok(Some(value));
        }
        // ParseFloatStringAsInt: a finite whole number in [0, 2^54].
        match simple_atod(text.as_bytes()) {
            Some(value) if value.is_finite() => {
                if !(0.0..=18_014_398_509_481_984.0).contains(&value) {
                    return fail("JSON number out of range for int");
                }
                if value.fract() != 0.0 {
                    return fail("expected integer, but JSON number had fractional part");
                }
                Ok(Some(value as u64))
            }
            _ => fail("invalid number"),
        }
    }
}

/// Reads one `OrcaLoadReport` object, and nothing after it.
pub(super) fn parse(input: &[u8]) -> Result<OrcaLoadReport, Kind> {
    let mut lexer = Lexer { input, at: 0 };
    let mut report = OrcaLoadReport::default();
    let mut parsed = [false; 10];
    lexer.expect(b'{', "expected an object")?;
    if lexer.peek() == Some(b'}') {
        lexer.at += 1;
    } else {
        loop {
            let name = lexer.string()?;
            lexer.expect(b':', "expected ':'")?;
            let number = field(&name).ok_or(Kind::Json("no such field"))?;
            let slot = number as usize;
            if parsed[slot] && lexer.peek() != Some(b'n') {
                return fail("field has already been set");
            }
            match number {
                3 => {
                    if let Some(value) = lexer.uint64()? {
                        #[allow(deprecated)]
                        {
                            report.rps = value;
                        }
                        parsed[slot] = true;
                    }
                }
                4 | 5 | 8 => {
                    if !lexer.null()? {
                        parsed[slot] |= map(&mut lexer, map_mut(&mut report, number))?;
                    }
                }
                _ => {
                    if let Some(value) = lexer.double()? {
                        *scalar(&mut report, number) = value;
                        parsed[slot] = true;
                    }
                }
            }
            match lexer.peek() {
                Some(b',') => lexer.at += 1,
                Some(b'}') => {
                    lexer.at += 1;
                    break;
                }
                _ => return fail("expected ',' or '}'"),
            }
        }
    }
    lexer.skip_space();
    if lexer.at != input.len() {
        return fail("extraneous characters after end of JSON object");
    }
    Ok(report)
}

fn scalar(report: &mut OrcaLoadReport, number: u32) -> &mut f64 {
    match number {
        1 => &mut report.cpu_utilization,
        2 => &mut report.mem_utilization,
        6 => &mut report.rps_fractional,
        7 => &mut report.eps,
        _ => &mut report.application_utilization,
    }
}

/// A map of doubles (protobuf's `ParseMap`): a key twice is an error, a
/// `null` value is 0. Whether it added an entry.
fn map(
    lexer: &mut Lexer<'_>,
    into: &mut std::collections::BTreeMap<String, f64>,
) -> Result<bool, Kind> {
    lexer.expect(b'{', "expected an object")?;
    if lexer.peek() == Some(b'}') {
        lexer.at += 1;
        return Ok(false);
    }
    let mut keys = std::collections::BTreeSet::new();
    loop {
        let key = lexer.string()?;
        lexer.expect(b':', "expected ':'")?;
        if !keys.insert(key.clone()) {
            return fail("repeated map key");
        }
        let value = lexer.double()?.unwrap_or(0.0);
        into.insert(key, value);
        match lexer.peek() {
            Some(b',') => lexer.at += 1,
            Some(b'}') => {
                lexer.at += 1;
                return Ok(true);
            }
            _ => return fail("expected ',' or '}'"),
        }
    }
}
