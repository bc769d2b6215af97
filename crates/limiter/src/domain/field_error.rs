use serde::Serialize;

/// One invalid input field, named as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Every invalid field of one input, so a form can show them all at once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    /// Records the error of a parse and yields its value, if any.
    pub fn check<T>(&mut self, result: Result<T, FieldError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) => {
                self.0.push(e);
                None
            }
        }
    }

    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }

    /// The first `shown` errors, and one more (under `field`) that counts the others: a
    /// file of 100,000 policies can have as many errors, too many for one answer.
    pub fn capped(mut self, shown: usize, field: &str) -> Self {
        if self.0.len() > shown {
            let more = self.0.len() - shown;
            self.0.truncate(shown);
            self.push(
                field,
                format!("and {more} more errors (the first {shown} are shown)"),
            );
        }
        self
    }
}

impl From<FieldError> for FieldErrors {
    fn from(e: FieldError) -> Self {
        Self(vec![e])
    }
}

impl std::fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join("; "))
    }
}

impl std::error::Error for FieldErrors {}
