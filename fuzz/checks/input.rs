//! Reading a fuzz input as a few choices followed by bytes.

/// A fuzz input read front to back; reads past its end give zeros.
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// The next byte (0 once the input is used up).
    pub fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&byte, rest)) => {
                self.rest = rest;
                byte
            }
            None => 0,
        }
    }

    /// The next two bytes, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }

    /// The next four bytes, big-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// The next eight bytes, big-endian.
    pub fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// The next `len` bytes (fewer at the end).
    pub fn bytes(&mut self, len: usize) -> &'a [u8] {
        let (taken, rest) = self.rest.split_at(len.min(self.rest.len()));
        self.rest = rest;
        taken
    }

    /// The bytes up to the next `separator` (or the end), without it.
    pub fn until(&mut self, separator: u8) -> &'a [u8] {
        match self.rest.iter().position(|&b| b == separator) {
            Some(at) => {
                let taken = &self.rest[..at];
                self.rest = &self.rest[at + 1..];
                taken
            }
            None => self.rest(),
        }
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// `wire` cut into chunks whose lengths cycle through `sizes` (a size of 0
/// is an empty chunk, as a body may send; at most `wire.len() + 8` chunks).
pub fn split<'w>(wire: &'w [u8], sizes: &[u8]) -> Vec<&'w [u8]> {
    if sizes.is_empty() {
        return vec![wire];
    }
    let mut chunks = Vec::new();
    let mut rest = wire;
    let mut empties = 0;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        // At most 8 empty chunks; after them a size of 0 reads as 1.
        let size = match size {
            0 if empties == 8 => 1,
            0 => {
                empties += 1;
                0
            }
            size => size,
        };
        let (chunk, after) = rest.split_at(usize::from(size).min(rest.len()));
        chunks.push(chunk);
        rest = after;
    }
    chunks
}

/// Headers read from the input until it ends: each is a byte choosing a
/// name from `names` (or, past them, a name made of the next bytes), then
/// its value up to a 0 byte. Values `http` refuses are skipped; a name may
/// come back, so it has several values.
pub fn headers(input: &mut Input<'_>, names: &[&'static str], max: usize) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    while !input.is_empty() && headers.len() < max {
        let choice = usize::from(input.byte());
        let name = match names.get(choice % (names.len() + 1)) {
            Some(name) => http::HeaderName::from_static(name),
            None => match http::HeaderName::from_bytes(input.until(b':')) {
                Ok(name) => name,
                Err(_) => continue,
            },
        };
        if let Ok(value) = http::HeaderValue::from_bytes(input.until(0)) {
            headers.append(name, value);
        }
    }
    headers
}
