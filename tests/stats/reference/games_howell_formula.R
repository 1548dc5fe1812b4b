# Games-Howell test from the formula (Games & Howell 1976, J. Educ. Stat. 1(2), 113-125), with
# R's studentized range distribution (ptukey/qtukey). Cross-checked in make_reference.R against
# rstatix::games_howell_test (which rounds p.adj to 3 digits, hence this full-precision version).
#
# For groups i < j (order of levels(g)) with means m, variances v (n - 1 denominator), sizes n:
#   estimate = m_j - m_i,  se = sqrt(v_i/n_i + v_j/n_j),  t = estimate / se
#   df = (v_i/n_i + v_j/n_j)^2 / ((v_i/n_i)^2/(n_i - 1) + (v_j/n_j)^2/(n_j - 1))   (Welch)
#   p_adj = P(Q_{k,df} > sqrt(2) |t|)              (k = number of groups)
#   CI = estimate -/+ qtukey(conf.level, k, df) / sqrt(2) * se
#   p = 2 P(T_df > |t|)                             (unadjusted Welch t-test p)

games_howell_formula <- function(y, g, conf.level = 0.95) {
  g <- factor(g)
  lev <- levels(g)
  k <- length(lev)
  m <- tapply(y, g, mean); v <- tapply(y, g, var); n <- tapply(y, g, length)
  rows <- list()
  for (i in seq_len(k)) for (j in seq_len(k)) if (i < j) {
    a <- v[[i]] / n[[i]]; b <- v[[j]] / n[[j]]
    est <- m[[j]] - m[[i]]
    se <- sqrt(a + b)
    df <- (a + b)^2 / (a^2 / (n[[i]] - 1) + b^2 / (n[[j]] - 1))
    t <- est / se
    half <- qtukey(conf.level, k, df) / sqrt(2) * se
    rows[[length(rows) + 1]] <- data.frame(group1 = lev[i], group2 = lev[j], estimate = est,
      ci_low = est - half, ci_high = est + half, statistic = t, df = df,
      p = 2 * pt(-abs(t), df), p_adj = ptukey(sqrt(2) * abs(t), k, df, lower.tail = FALSE))
  }
  do.call(rbind, rows)
}
